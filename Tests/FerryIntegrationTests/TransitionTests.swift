@_spi(Testing) import FerryEngine
import FerryCore
@testable import FerryRPC
import Foundation
import Synchronization
import Testing
import TestHTTPServer

/// Issue 40: the engine tells each real transition of an item once, with the state before it, through one
/// monitor protocol (TransferMonitor); its monitors (the reporter, the hooks, aria2's notifications) keep no
/// table of what they told. A download in 4 ranges told `paused` once per range and once for the item.
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
        let monitor = RecordingMonitor()
        let manager = try TransferManager(configuration: testConfiguration(), monitor: monitor)
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/t.bin"), directory: dir.path, segments: 4))
        try await eventually("its four ranges run") { server.requests("/t.bin").count >= 5 && manager.snapshot(of: id)?.segments != nil }
        manager.pause(id)
        try await eventually("paused") { manager.snapshot(of: id)?.state == .paused }
        manager.resume(id)
        try await finish(manager, [id])
        #expect(dir.contents("t.bin") == body)

        manager.drainEvents()
        let told = monitor.told.filter { $0.id == id }
        let transitions = told.filter { $0.kind == .transitioned }
        #expect(told.first?.kind == .added && told.first?.state == .queued, "\(told)")
        // A chain: each transition starts where the one before ended, and none repeats a state.
        for (earlier, later) in zip(transitions, transitions.dropFirst()) {
            #expect(later.before == earlier.state, "\(told)")
        }
        #expect(transitions.first?.before == .queued && transitions.first?.state == .running, "\(told)")
        #expect(transitions.filter { $0.state == .paused }.count == 1)
        #expect(transitions.filter { $0.state == .completed }.count == 1)
        #expect(transitions.last?.state == .completed)
        // The engine changed the item more often than that (its ranges each stopped): those are updates, in
        // the state last told.
        let updates = told.filter { $0.kind == .updated }
        #expect(!updates.isEmpty, "\(told)")
        var last = TransferState.queued
        for entry in told {
            if entry.kind == .updated { #expect(entry.state == last, "an update in a state not told: \(told)") }
            if let state = entry.state { last = state }
        }
    }

    /// A remove is told (by id), and aria2's notifier forgets the item it counted as active.
    @Test func aRemoveIsToldAndTheNotifierForgetsTheItem() async throws {
        let resource = Resource(body: Resource.randomBytes(count: 1 << 20, seed: 402))
        server.route("/r.bin", .serve(resource, ServeOptions(stallAfter: 64 << 10)))
        let monitor = RecordingMonitor()
        let notifier = Aria2Notifier()
        let manager = try TransferManager(configuration: testConfiguration(), monitor: CompositeMonitor([monitor, notifier]))
        defer { manager.shutdown() }
        let id = manager.add(TransferSpec(download: server.url("/r.bin"), directory: dir.path))
        try await eventually("running") { manager.snapshot(of: id)?.bytesDone ?? 0 > 0 }
        manager.drainEvents()
        #expect(notifier.activeCount == 1)
        manager.remove(id)
        manager.drainEvents()
        #expect(monitor.told.last.map { $0.kind == .removed && $0.id == id } == true, "\(monitor.told)")
        #expect(notifier.activeCount == 0)
    }
}

/// Everything a monitor is told, in order.
final class RecordingMonitor: TransferMonitor {
    enum Kind { case added, transitioned, updated, removed }
    struct Entry: CustomStringConvertible {
        var kind: Kind
        var id: TransferID
        var before: TransferState?
        var state: TransferState?
        var description: String { "\(kind) \(id) \(before?.rawValue ?? "-")>\(state?.rawValue ?? "-")" }
    }

    private let entries = Mutex<[Entry]>([])
    var told: [Entry] { entries.withLock { $0 } }

    var hearsAdds: Bool { true }
    func added(_ item: TransferSnapshot) { entries.withLock { $0.append(Entry(kind: .added, id: item.id, state: item.state)) } }
    func transitioned(_ item: TransferSnapshot, from before: TransferState) {
        entries.withLock { $0.append(Entry(kind: .transitioned, id: item.id, before: before, state: item.state)) }
    }
    func updated(_ item: TransferSnapshot) { entries.withLock { $0.append(Entry(kind: .updated, id: item.id, state: item.state)) } }
    func removed(_ id: TransferID) { entries.withLock { $0.append(Entry(kind: .removed, id: id)) } }
}

/// A monitor that hands every snapshot it is told of (added, transitioned, updated) to `body`.
struct EveryChange: TransferMonitor {
    let body: @Sendable (TransferSnapshot) -> Void
    var hearsAdds: Bool { true }
    func added(_ item: TransferSnapshot) { body(item) }
    func transitioned(_ item: TransferSnapshot, from before: TransferState) { body(item) }
    func updated(_ item: TransferSnapshot) { body(item) }
}
