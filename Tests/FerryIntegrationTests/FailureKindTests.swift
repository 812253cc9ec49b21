@_spi(Testing) import FerryEngine
@testable import FerryCore
@testable import FerryRPC
@testable import FerryTUI
import Foundation
import Testing
import TestHTTPServer

/// Issue 40: a failure's kind is set where the failure is made and carried to every surface; the message is
/// for people, and rewording it changes no row word, no aria2 errorCode, no hook variable and no `list --json`.
@Suite struct FailureKindTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// A port nothing listens on (bound, then closed).
    static func closedPort() throws -> Int {
        let probe = try TestHTTPServer()
        let port = probe.port
        probe.shutdown()
        return port
    }

    /// Each surface's reading of a failed item.
    static func surfaces(_ item: TransferSnapshot) -> (row: String, errorCode: String?, kind: String?, status: String?) {
        let environment = HookRunner.environment(for: item)
        return (RowText.status(item, now: Date()), Aria2RPC.errorCode(item), environment["FERRY_ERROR_KIND"],
                environment["FERRY_HTTP_STATUS"])
    }

    @Test func aRewordedMessageChangesNoSurface() async throws {
        server.route("/missing", .status(404))
        let refusedURL = URL(string: "http://127.0.0.1:\(try Self.closedPort())/x.bin")!
        var configuration = testConfiguration()
        configuration.retry.maxRetries = 0
        let manager = try TransferManager(configuration: configuration)
        defer { manager.shutdown() }
        let missing = manager.add(TransferSpec(download: server.url("/missing"), directory: dir.path))
        let refused = manager.add(TransferSpec(download: refusedURL, directory: dir.path))
        try await finish(manager, [missing, refused])

        let notFound = try #require(manager.snapshot(of: missing))
        #expect(notFound.state == .failed)
        #expect(notFound.failure == FailureCause(.http, status: 404))
        let noOne = try #require(manager.snapshot(of: refused))
        #expect(noOne.failure?.kind == .refused, "the transport says what it was: \(noOne.lastError ?? "")")

        for item in [notFound, noOne] {
            let before = Self.surfaces(item)
            var reworded = item
            // Words that read like another failure altogether, as a careless rewording could make them.
            reworded.lastError = "No space left on device: the proxy refused the tunnel (error -1003)"
            let after = Self.surfaces(reworded)
            #expect(before.row == after.row && before.errorCode == after.errorCode && before.kind == after.kind
                    && before.status == after.status, "\(before) became \(after)")
        }
        #expect(Self.surfaces(notFound).row == "HTTP 404")
        #expect(Self.surfaces(notFound).errorCode == "3")
        #expect(Self.surfaces(notFound).kind == "http")
        #expect(Self.surfaces(noOne).row == "refused")
        #expect(Self.surfaces(noOne).errorCode == "6")
        #expect(Self.surfaces(noOne).kind == "refused")
    }

    /// The kind is stored with the item: an engine started again reads it back, and `list --json` gives it.
    @Test func theKindSurvivesARestartAndIsListed() async throws {
        server.route("/gone", .status(410))
        let state = try TempDir()
        let directory = StateDirectory(option: state.path)
        var configuration = testConfiguration()
        configuration.retry.maxRetries = 0
        do {
            let manager = try TransferManager(configuration: configuration, store: try directory.openStore())
            let id = manager.add(TransferSpec(download: server.url("/gone"), directory: dir.path))
            try await finish(manager, [id])
            manager.shutdown()
        }
        let again = try TransferManager(configuration: configuration, store: try directory.openStore())
        let item = try #require(again.snapshot(QueueView()).items.first)
        again.shutdown()
        #expect(item.failure == FailureCause(.http, status: 410))
        var listing = Data()
        let stream = QueueListing.Stream(json: true) { listing.append($0) }
        try QueueListing.items(of: QueueView(), in: directory) { stream.add($0) }
        stream.finish()
        let text = String(decoding: listing, as: UTF8.self)
        #expect(text.contains("\"errorKind\" : \"http\""), "\(text)")
        #expect(text.contains("\"httpStatus\" : 410"), "\(text)")
    }
}
