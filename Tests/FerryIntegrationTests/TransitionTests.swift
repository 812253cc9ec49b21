@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Synchronization
import Testing
import TestHTTPServer

/// Issue 40: the engine tells each real transition of an item once, with the state before it
/// (TransferEvent.before); its listeners (the reporter, the hooks, aria2's notifications) keep no table of what
/// they told. A download in 4 ranges told `paused` once per range and once for the item.
@Suite struct TransitionTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    @Test func eachTransitionOfADownloadInRangesIsToldOnce() async throws {
        let body = Resource.randomBytes(count: 8 << 20, seed: 401)
        let resource = Resource(body: body, etag: "\"t\"")
        // The probe and the four ranges stall (the test steers them however busy the machine); then whole.
        let stalled = Behavior.serve(resource, ServeOptions(stallAfter: 64 << 10))
        server.route("/t.bin", Array(repeating: stalled, count: 5) + [.serve(resource)])
        let events = Mutex<[TransferEvent]>([])
        let manager = try TransferManager(configuration: testConfiguration()) { event in
            events.withLock { $0.append(event) }
        }
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/t.bin"), directory: dir.path, segments: 4))
        try await eventually("its four ranges run") { server.requests("/t.bin").count >= 5 && manager.snapshot(of: id)?.segments != nil }
        manager.pause(id)
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        manager.resume(id)
        try await finish(manager, [id])
        #expect(dir.contents("t.bin") == body)

        let told = events.withLock { $0 }.filter { $0.id == id }
        let transitions = told.filter(\.isTransition)
        // A chain: each transition starts where the one before ended, and none repeats a state.
        for (earlier, later) in zip(transitions, transitions.dropFirst()) {
            #expect(later.before == earlier.state, "\(transitions.map { "\($0.before?.rawValue ?? "-")>\($0.state.rawValue)" })")
        }
        #expect(transitions.first?.before == nil && transitions.first?.state == .queued)
        #expect(transitions.filter { $0.state == .paused }.count == 1)
        #expect(transitions.filter { $0.state == .completed }.count == 1)
        #expect(transitions.last?.state == .completed)
        // The engine changed the item more often than that (its ranges each stopped): those are not transitions.
        #expect(told.count > transitions.count, "\(told.map(\.state.rawValue))")
    }
}
