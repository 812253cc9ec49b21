import Foundation
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI

/// A fixed clock and queue values for deterministic screens.
enum Fixtures {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let mib: Int64 = 1 << 20

    static func item(_ id: Int64, _ name: String, _ state: TransferState, done: Int64 = 0, total: Int64? = nil,
                     rate: Double? = nil, eta: TimeInterval? = nil, upload: Bool = false,
                     url: String? = nil) -> TransferSnapshot {
        let address = URL(string: url ?? "https://example.com/files/\(name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? "x")")!
        let spec = upload
            ? TransferSpec(upload: UploadSpec(method: "PUT", body: .raw(.file(path: "/home/me/\(name)"), contentType: "application/octet-stream")), to: address)
            : TransferSpec(download: address, directory: "/home/me/Downloads")
        return TransferSnapshot(
            id: TransferID(id), spec: spec, state: state, bytesDone: done, bytesExpected: total,
            fileName: upload ? nil : name, savedPath: state == .completed && !upload ? "/home/me/Downloads/\(name)" : nil,
            bytesPerSecond: rate, eta: eta, retries: 0, maxRetries: 5, nextRetryAt: nil, lastError: nil,
            attempts: [], validators: Validators(), lastStatus: nil, response: nil)
    }

    /// One item in each state, plus an upload and one of unknown size.
    static func queue() -> QueueSnapshot {
        var waiting = item(3, "backup.tar.gz", .waiting, done: 30 * mib, total: 100 * mib)
        waiting.retries = 2
        waiting.nextRetryAt = now.addingTimeInterval(7.4)
        waiting.lastError = "HTTP 503 Service Unavailable"
        waiting.failure = FailureCause(.http, status: 503)
        var failed = item(6, "missing.iso", .failed, total: nil)
        failed.lastError = "HTTP 404 Not Found"
        failed.failure = FailureCause(.http, status: 404)
        let items = [
            item(1, "debian-12.iso", .running, done: 300 * mib, total: 628 * mib, rate: 11.5 * Double(mib), eta: 28.5),
            item(2, "photos.zip", .running, done: 5 * mib, total: 20 * mib, rate: 512 * 1024, eta: 30, upload: true),
            waiting,
            item(4, "stream.log", .running, done: 3 * mib + 1000, total: nil, rate: 64 * 1024),
            item(5, "notes.pdf", .paused, done: 1 * mib, total: 4 * mib),
            failed,
            item(7, "song.flac", .completed, done: 40 * mib, total: 40 * mib),
            item(8, "later.bin", .queued),
            item(9, "abandoned.dat", .cancelled, done: 2 * mib, total: 8 * mib),
        ]
        var totals = QueueTotals()
        for i in items { totals.count[i.state, default: 0] += 1 }
        totals.downloadBytesPerSecond = 11.5 * Double(mib) + 64 * 1024
        totals.uploadBytesPerSecond = 512 * 1024
        return QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
    }

    /// `keys` pressed one after another from `state` on `snapshot`: the state after them and every command they made.
    static func press(_ keys: [Key], from state: AppState, on snapshot: QueueSnapshot) -> (AppState, [Command]) {
        var state = state
        var all: [Command] = []
        for key in keys {
            let (next, commands) = reduce(state, key, snapshot)
            state = next
            // The file system's answers, as the app runs them (on the disk; here at once).
            for command in commands {
                if let answer = FileEffects.perform(command, cwd: state.workingDirectory) {
                    state = reduce(state, answer: answer)
                } else {
                    all.append(command)
                }
            }
        }
        return (state, all)
    }

    static func state(width: Int = 80, height: Int = 14) -> AppState {
        AppState(downloadDirectory: "/home/me/Downloads", width: width, height: height)
    }

    static func render(_ state: AppState, _ snapshot: QueueSnapshot = queue(), unicode: Bool = true) -> Canvas {
        Screen.render(state, snapshot, RenderContext(unicode: unicode, now: now))
    }
}

extension Fixtures {
    /// An upload that was retried, with credentials in its URL, a hostile response and a minute of rates.
    static func detailedUpload() -> TransferSnapshot {
        var item = item(2, "photos.zip", .completed, done: 20 * mib, total: 20 * mib, upload: true,
                        url: "https://alice:s3cret@upload.example.com/put/photos.zip")
        item.lastStatus = 201
        item.retries = 1
        item.attempts = [
            Attempt(number: 1, startedAt: now.addingTimeInterval(-95), endedAt: now.addingTimeInterval(-80), fromOffset: 0,
                    status: 503, error: "HTTP 503 Service Unavailable"),
            Attempt(number: 2, startedAt: now.addingTimeInterval(-70), endedAt: now.addingTimeInterval(-10), fromOffset: 0,
                    status: 201, error: nil),
        ]
        item.response = ServerResponse(status: 201, headers: [HTTPHeader(name: "Content-Type", value: "application/json"),
                                                              HTTPHeader(name: "X-Other", value: "ignored")],
                                       body: Data("{\"id\": 42,\n \"note\": \"\u{1B}]0;owned\u{07}ok\"}\n".utf8), bodyLength: 38)
        item.rateHistory = [0, 100, 200, 400, 800, 800, 400, 200, 100, 0].map { $0 * 1024 }
        return item
    }
}
