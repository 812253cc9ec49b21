@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// Segmented downloads against the real server: ranges written in place, one cut range resumed alone,
/// a restart in the middle, and a server that ignores Range.
@Suite struct SegmentedDownloadTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// The probe's answer stops after 64 KiB and stays open, so the engine always decides to split before
    /// the probe could finish (on loopback a probe may otherwise deliver the whole file first: correct, but
    /// nothing would be segmented).
    func probe(_ resource: Resource, _ options: ServeOptions = ServeOptions()) -> Behavior {
        var options = options
        options.stallAfter = 64 << 10
        return .serve(resource, options)
    }

    func spec(_ path: String, segments: Int = 4) -> TransferSpec {
        TransferSpec(download: server.url(path), directory: dir.path, segments: segments)
    }

    /// The `N-M` of a `Range: bytes=N-M` header.
    func range(_ request: RecordedRequest) -> (Int, Int)? {
        guard let text = request.header("Range"), text.hasPrefix("bytes=") else { return nil }
        let ends = text.dropFirst(6).split(separator: "-").compactMap { Int($0) }
        return ends.count == 2 ? (ends[0], ends[1]) : nil
    }

    @Test func eightSegmentsGiveAnIdenticalFile() async throws {
        let body = Resource.randomBytes(count: 16 << 20, seed: 50)
        let resource = Resource(body: body, etag: "\"seg\"")
        server.route("/big.bin", [probe(resource), .serve(resource)])
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/big.bin", segments: 8))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(item.progress == 1.0)
        #expect(dir.contents("big.bin") == body)
        #expect(dir.files() == ["big.bin"])
        let requests = server.requests("/big.bin")
        // The probe, then the eight ranges, each with If-Range, covering the file exactly.
        #expect(requests.count == 9)
        #expect(requests[0].header("Range") == nil)
        let ranges = requests.dropFirst().compactMap(range).sorted { $0.0 < $1.0 }
        #expect(ranges.count == 8)
        #expect(ranges.first?.0 == 0 && ranges.last?.1 == body.count - 1)
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.1 + 1 == $1.0 })
        #expect(requests.dropFirst().allSatisfy { $0.header("If-Range") == "\"seg\"" })
        #expect(item.segments?.count == 8)
    }

    @Test func aCutSegmentIsResumedAlone() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 51)
        let resource = Resource(body: body, etag: "\"cut\"")
        // The probe, four ranges of which the second to arrive is cut after 300,000 bytes, then whole answers.
        server.route("/cut.bin", [probe(resource), .serve(resource), .serve(resource, ServeOptions(cutAfter: 300_000)),
                                  .serve(resource)])
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/cut.bin", segments: 4))
        try await finish(manager, [id])
        #expect(manager.snapshot(of: id)?.state == .completed)
        #expect(dir.contents("cut.bin") == body)
        let requests = server.requests("/cut.bin")
        #expect(requests.count == 6)
        let starts: Set<Int> = [0, 2 << 20, 4 << 20, 6 << 20]
        let resumed = requests.dropFirst().compactMap(range).filter { !starts.contains($0.0) }
        // Exactly one range went again, from where its cut left it, not from its start.
        try #require(resumed.count == 1)
        #expect(starts.contains(resumed[0].0 - 300_000))
    }

    @Test func pauseAndResumeAcrossARestartFetchOnlyWhatIsMissing() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 52)
        let resource = Resource(body: body, etag: "\"restart\"")
        // Every range stops after 512 KiB and stays open, so the engine is caught mid-way.
        let stall = Behavior.serve(resource, ServeOptions(stallAfter: 512 << 10))
        server.route("/restart.bin", [probe(resource), stall, stall, stall, stall, .serve(resource)])
        let store = try SQLiteQueueStore(path: dir.path + "/queue.sqlite")
        let first = try TransferManager(configuration: testConfiguration(), store: store)
        let id = first.add(spec("/restart.bin", segments: 4))
        try await eventually("every range has 512 KiB on disk") {
            let done: [Int64] = ((try? store.loadAll())?.first?.segments ?? []).map(\.done)
            return done == [Int64](repeating: 512 << 10, count: 4)
        }
        first.pause(id)
        try await eventually("paused") { first.snapshot(of: id)?.state == .paused && first.snapshot().items.first?.attempts.last?.endedAt != nil }
        first.shutdown()
        let before = server.requests("/restart.bin").count
        #expect(before == 5)

        let second = try TransferManager(configuration: testConfiguration(), store: SQLiteQueueStore(path: dir.path + "/queue.sqlite"))
        defer { second.shutdown() }
        #expect(second.snapshot(of: id)?.state == .paused)
        #expect(second.snapshot(of: id)?.bytesDone == 2 << 20)
        second.resume(id)
        try await finish(second, [id])
        #expect(second.snapshot(of: id)?.state == .completed)
        #expect(dir.contents("restart.bin") == body)
        let after = server.requests("/restart.bin").dropFirst(before)
        #expect(after.count == 4)
        let starts: [Int] = after.compactMap(range).map(\.0).sorted()
        let expected: [Int] = [0, 2 << 20, 4 << 20, 6 << 20].map { $0 + (512 << 10) }
        #expect(starts == expected)
    }

    @Test func aServerIgnoringRangeFallsBackToOneStream() async throws {
        let body = Resource.randomBytes(count: 6 << 20, seed: 53)
        let resource = Resource(body: body, etag: "\"n\"")
        server.route("/norange.bin", [probe(resource, ServeOptions(honorRange: false)), .serve(resource, ServeOptions(honorRange: false))])
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/norange.bin", segments: 4))
        try await finish(manager, [id])
        let item = try #require(manager.snapshot(of: id))
        #expect(item.state == .completed, "\(item.lastError ?? "")")
        #expect(dir.contents("norange.bin") == body)
        #expect(item.segments == nil)
        // After the probe, the fallback: one stream asking for no range.
        #expect(server.requests("/norange.bin").dropFirst().contains { $0.header("Range") == nil })
    }

    @Test func aSmallFileIsNotSplit() async throws {
        let body = Resource.randomBytes(count: 1_500_000, seed: 54)
        server.route("/small.bin", .serve(Resource(body: body, etag: "\"s\"")))
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        let id = manager.add(spec("/small.bin", segments: 8))
        try await finish(manager, [id])
        #expect(dir.contents("small.bin") == body)
        #expect(server.requests("/small.bin").count == 1)
    }

    @Test func theCommandLineTakesSegments() async throws {
        let body = Resource.randomBytes(count: 4 << 20, seed: 55)
        let resource = Resource(body: body, etag: "\"c\"")
        server.route("/cli.bin", [probe(resource), .serve(resource)])
        let result = try await runFerry(["get", "--segments", "2", "-o", dir.path, server.url("/cli.bin").absoluteString])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(dir.contents("cli.bin") == body)
        #expect(server.requests("/cli.bin").count == 3)
        let bad = try await runFerry(["get", "--segments", "0", server.url("/cli.bin").absoluteString])
        #expect(bad.status == 2)
    }
}
