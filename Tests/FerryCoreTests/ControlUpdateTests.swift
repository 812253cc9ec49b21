import Foundation
import Testing
@testable import FerryCore
@testable import FerryModel

/// What an update carries: an item whose only change is its progress goes as a few numbers, anything else
/// whole; either way the client's copy ends equal to the engine's.
@Suite struct ControlUpdateTests {
    func item(_ id: Int64, _ state: TransferState, done: Int64) -> TransferSnapshot {
        var spec = TransferSpec(download: URL(string: "https://example.com/files/\(id).bin")!, directory: "/tmp/dl",
                                headers: [HTTPHeader(name: "X-Long", value: String(repeating: "v", count: 200))])
        spec.segments = 1
        return TransferSnapshot(id: TransferID(id), spec: spec, state: state, bytesDone: done, bytesExpected: 1 << 30)
    }

    func queue(_ items: [TransferSnapshot], version: UInt64) -> QueueSnapshot {
        QueueSnapshot(version: version, items: items, totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
    }

    @Test func progressAloneGoesAsNumbers() throws {
        let before = queue([item(1, .running, done: 0), item(2, .queued, done: 0)], version: 1)
        var moved = item(1, .running, done: 5 << 20)
        moved.bytesPerSecond = 1_048_576
        moved.eta = 1019
        let after = queue([moved, item(2, .queued, done: 0)], version: 2)
        let update = try #require(ControlUpdate(from: before, to: after, ratesDue: false))
        #expect(update.items.isEmpty)
        #expect(update.progress?.map(\.id) == [TransferID(1)])
        #expect(before.applying(update) == after)
        // A few numbers instead of the item with its spec.
        let encoded = try JSONEncoder().encode(update).count
        let whole = try JSONEncoder().encode(moved).count
        #expect(encoded < whole)

        // A change of state goes whole.
        let paused = queue([item(1, .paused, done: 5 << 20), item(2, .queued, done: 0)], version: 3)
        let stateUpdate = try #require(ControlUpdate(from: after, to: paused, ratesDue: false))
        #expect(stateUpdate.items.map(\.id) == [TransferID(1)])
        #expect(stateUpdate.progress == nil)
        #expect(after.applying(stateUpdate) == paused)
    }

    @Test func aNewVersionAloneSendsNothing() {
        let one = queue([item(1, .queued, done: 0)], version: 1)
        #expect(ControlUpdate(from: one, to: queue([item(1, .queued, done: 0)], version: 9), ratesDue: true) == nil)
    }
}
