import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
import FerryTransport

/// What a single stream's run does on the delegate queue, where every transfer's callbacks take turns: a small
/// file's body, which comes whole with its response, costs no write there and no turn of the engine's lock for
/// its accepted response; its end reports all of it and hands the file, body unwritten, to the finisher.
@Suite struct RangeRunTests {
    let dir: String
    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-run-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    final class Told: Sendable {
        let accepted = Mutex<[String]>([])
        let named = Mutex<[String]>([])
        let claimed = Mutex<[String]>([])
        let reports = Mutex<[AttemptReport]>([])
    }

    func run(_ told: Told) -> (RangeRun, URLSessionTask, URL) {
        let url = URL(string: "http://example.com/files/7.bin")!
        let start = RangeRun.Start(spec: TransferSpec(download: url, directory: dir), fileName: nil, rangeStart: 0, from: 0,
                                   end: nil, knownTotal: nil, validators: Validators(), bufferSize: 64 << 10)
        let run = RangeRun(start: start, names: NameClaims(), clock: SystemClock(),
                           claiming: { name, _ in told.claimed.withLock { $0.append(name) } },
                           named: { name in told.named.withLock { $0.append(name) } },
                           accepted: { name, _, _, _ in told.accepted.withLock { $0.append(name) } },
                           finish: { report in told.reports.withLock { $0.append(report) } })
        return (run, URLSession(configuration: .keepingNothing).dataTask(with: url), url)
    }

    func response(_ url: URL, length: Int) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                        headerFields: ["Content-Length": "\(length)", "ETag": "\"v1\""])!
    }

    @Test func aBodyThatComesWholeWithItsResponseIsToldWithItsEndAndWrittenByTheFinisher() throws {
        defer { cleanup() }
        let told = Told()
        let (run, task, url) = run(told)
        run.didReceive(response: response(url, length: 100), task: task)
        // The item knows its name as soon as the `.part` file is made.
        #expect(told.named.withLock { $0 } == ["7.bin"])
        run.didReceive(data: Data(repeating: 5, count: 100))
        run.didComplete(error: nil)
        // The name reached the store before the `.part` file was made; the engine heard nothing until the end.
        #expect(told.claimed.withLock { $0 } == ["7.bin"])
        #expect(told.accepted.withLock { $0 }.isEmpty)
        let report = try #require(told.reports.withLock { $0.first })
        #expect(report.fileName == "7.bin")
        #expect(report.validators == Validators(etag: "\"v1\"", totalLength: 100))
        // What is on disk: the finisher writes the rest and counts the whole file.
        #expect(report.bytesExpected == 100 && report.bytesDone == 0)
        guard case let .finished(handover?) = report.outcome else {
            Issue.record("not finished with a file: \(report.outcome)")
            return
        }
        // The body is written when the finisher flushes the file, not before.
        let part = dir + "/7.bin.part"
        #expect(FileManager.default.contents(atPath: part) == Data())
        try handover.file.flush()
        #expect(FileManager.default.contents(atPath: part) == Data(repeating: 5, count: 100))
        handover.file.close()
    }

    @Test func aBodyThatGoesOnIsToldWithItsFirstPiece() throws {
        defer { cleanup() }
        let told = Told()
        let (run, task, url) = run(told)
        run.didReceive(response: response(url, length: 200), task: task)
        #expect(told.accepted.withLock { $0 }.isEmpty)
        run.didReceive(data: Data(repeating: 5, count: 100))
        #expect(told.accepted.withLock { $0 } == ["7.bin"])
        run.didReceive(data: Data(repeating: 6, count: 100))
        #expect(told.accepted.withLock { $0 } == ["7.bin"])
        run.didComplete(error: nil)
        guard case let .finished(handover?)? = told.reports.withLock({ $0.first?.outcome }) else {
            Issue.record("not finished with a file")
            return
        }
        handover.file.close()
    }
}
