import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// URLSession on Linux keeps a core busy while a connection's first transfer waits for data (a write
/// source corelibs never removes); a connection that served a request before does not. ferry sends a HEAD
/// on a new connection before a download uses it (ConnectionWarmth).
@Suite struct ConnectionWarmUpTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    func probeCPU(_ mode: String, _ path: String) async throws -> Int {
        try await runProbe([mode, server.url(path).absoluteString])["cpums"] ?? -1
    }

    @Test func aConnectionsFirstTransferBurnsCPUWhileItWaitsAndAReusedOneDoesNot() async throws {
        // The platform behaviour, in a process of its own: 3 MiB paced at 1 MiB/s, on a new connection and
        // on one a HEAD has used. Seen here: ~3 CPU-s against ~0.02 for 8 MiB at 2 MiB/s from nginx.
        server.route("/paced.bin", .serve(Resource(body: Resource.randomBytes(count: 3 << 20, seed: 90)),
                                          ServeOptions(bytesPerSecond: 1 << 20)))
        let cold = try await probeCPU("cold", "/paced.bin")
        let warm = try await probeCPU("warm", "/paced.bin")
        #expect(cold > 4 * warm + 100, "cold \(cold) ms, warm \(warm) ms of CPU")
    }

    @Test func aNewConnectionIsWarmedOnceThenReusedBySequentialDownloads() async throws {
        let bodies = (0..<3).map { Resource.randomBytes(count: 200_000 + $0, seed: UInt64(91 + $0)) }
        for (index, body) in bodies.enumerated() { server.route("/f\(index).bin", .serve(Resource(body: body))) }
        let manager = try TransferManager(configuration: testConfiguration(maxConcurrent: 1))
        defer { manager.shutdown() }
        let ids = manager.add((0..<3).map { TransferSpec(download: server.url("/f\($0).bin"), directory: dir.path) })
        try await finish(manager, Set(ids))
        for (index, body) in bodies.enumerated() {
            #expect(dir.contents("f\(index).bin") == body)
            #expect(server.requests("/f\(index).bin").count == 1)
        }
        // One HEAD opened the one connection; every download ran on it afterwards.
        #expect(server.headRequests("/f0.bin").count == 1)
        #expect(server.headRequests("/f1.bin").isEmpty)
        #expect(server.headRequests("/f2.bin").isEmpty)
        #expect(server.connectionsAccepted == 1)
    }

    @Test func aWarmUpThatFailsDoesNotHoldTheDownloadBack() async throws {
        // The HEAD meets the connection closed without an answer; the download goes ahead on a new one.
        let body = Resource.randomBytes(count: 100_000, seed: 96)
        server.route("/flaky.bin", .serve(Resource(body: body)))
        server.routeHead("/flaky.bin", .closeWithoutResponse)
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/flaky.bin"), directory: dir.path))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed)
        #expect(dir.contents("flaky.bin") == body)
        #expect(server.requests("/flaky.bin").count == 1)
        #expect(server.headRequests("/flaky.bin").count == 1)
    }

    @Test func aWarmUpThatGetsNoAnswerGivesWayAfterItsTimeout() async throws {
        // A server that never answers HEAD: the download starts anyway, after TransferManager.warmUpTimeout.
        let body = Resource.randomBytes(count: 100_000, seed: 97)
        server.route("/nohead.bin", .serve(Resource(body: body)))
        server.routeHead("/nohead.bin", .hang)
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/nohead.bin"), directory: dir.path))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed)
        #expect(dir.contents("nohead.bin") == body)
        #expect(server.requests("/nohead.bin").count == 1)
    }
}
