import Testing
@testable import FerryEngine
@testable import FerryModel

/// Issue 40: the engine's core in parts that keep their own invariants. The queue's index and the slot book are
/// driven by long random runs of every change they take, beside a plain model (a sorted array, counted afresh),
/// at sizes past the 2,000 items where the engine's asserts stop checking.
@Suite struct QueueIndexTests {
    /// A small deterministic generator (SplitMix64): a failing run is found again from its seed.
    struct Seeded {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
    }

    struct ModelEntry: Equatable {
        var rank: Int
        var id: TransferID
        var batch: Int64?
        var state: TransferState
        var host: String
    }

    static let hosts = ["a.example", "b.example", "c.example", "d.example", "e.example"]

    /// The index as the model has it: the same entries in the same order, and the counts a fresh count gives.
    func expectSame(_ index: QueueIndex, _ model: [ModelEntry], _ context: @autoclosure () -> String) {
        let entries = index.map { ModelEntry(rank: $0.rank, id: $0.id, batch: $0.batch, state: $0.state, host: index.hosts[Int($0.host)]) }
        #expect(entries == model, "\(context())")
        #expect(index.counts == Dictionary(grouping: model, by: \.state).mapValues(\.count), "\(context())")
        let queued = Dictionary(grouping: model.filter { $0.state == .queued }, by: \.host).mapValues(\.count)
        let indexQueued = Dictionary(uniqueKeysWithValues: index.queuedPerHost.map { (index.hosts[Int($0.key)], $0.value) })
        #expect(indexQueued == queued, "\(context())")
        #expect(index.violations().isEmpty, "\(index.violations()) \(context())")
    }

    @Test(arguments: [1, 2, 3, 4])
    func everyChangeKeepsTheIndexAndItsCounts(seed: UInt64) {
        var random = Seeded(state: seed)
        var index = QueueIndex()
        var model: [ModelEntry] = []
        var nextID: Int64 = 1
        for step in 0..<400 {
            switch random.below(6) {
            case 0, 1:
                // An add of a run of items (several per step: the queue grows past 2,000).
                for _ in 0..<(1 + random.below(60)) {
                    let rank = (model.last?.rank ?? -1) + 1
                    let entry = ModelEntry(rank: rank, id: TransferID(nextID), batch: random.below(3) == 0 ? nil : Int64(random.below(4)),
                                           state: random.pick(TransferState.allCases), host: random.pick(Self.hosts))
                    nextID += 1
                    index.append(id: entry.id, rank: entry.rank, batch: entry.batch, state: entry.state, host: entry.host)
                    model.append(entry)
                }
            case 2:
                // A change of state (and batch) of some items, found by rank as the engine finds them.
                for _ in 0..<min(model.count, 1 + random.below(30)) {
                    let at = random.below(model.count)
                    model[at].state = random.pick(TransferState.allCases)
                    model[at].batch = Int64(random.below(4))
                    let found = index.position(of: model[at].id, rank: model[at].rank)
                    #expect(found == at)
                    index.set(model[at].state, batch: model[at].batch, at: at)
                }
            case 3:
                // A remove of some items.
                let ids = Set((0..<random.below(40)).compactMap { _ in model.isEmpty ? nil : model[random.below(model.count)].id })
                let gone = index.remove(ids)
                #expect(gone.map(\.id) == model.filter { ids.contains($0.id) }.map(\.id))
                model.removeAll { ids.contains($0.id) }
            case 4:
                // A move of some items, in every direction.
                let ids = Set((0..<(1 + random.below(10))).compactMap { _ in model.isEmpty ? nil : model[random.below(model.count)].id })
                let direction = random.pick(QueueMove.allCases)
                let ranked = index.move(ids, direction)
                var array = model
                let (expected, _) = direction.apply(to: &array, rank: \.rank) { ids.contains($0.id) }
                model = array
                #expect(Set(ranked.map(\.id)) == Set(expected.map(\.id)))
            default:
                // A shift of one item to another place (aria2's changePosition).
                guard model.count > 1 else { continue }
                let from = random.below(model.count), to = random.below(model.count)
                let ranksBefore = model.map(\.rank)
                if let ranked = index.shift(from: from, to: to) {
                    let entry = model.remove(at: from)
                    model.insert(entry, at: to)
                    for position in min(from, to)...max(from, to) { model[position].rank = ranksBefore[position] }
                    #expect(ranked.count == abs(to - from) + 1)
                } else {
                    let span = ranksBefore[min(from, to)...max(from, to)]
                    #expect(zip(span, span.dropFirst()).contains { $0 >= $1 }, "a shift refused with ranks in order")
                }
            }
            // Counted afresh every few steps (each count walks the whole queue) and at the end.
            guard step % 20 == 0 || step == 399 else { continue }
            expectSame(index, model, "seed \(seed), step \(step)")
            for entry in model.prefix(3) + model.suffix(3) {
                #expect(index.position(of: entry.id) == index.position(of: entry.id, rank: entry.rank))
            }
        }
        #expect(index.count > 2_000, "the run went past the size the engine's asserts check (\(index.count))")
    }

    /// A host's id is given once and keeps naming that host, whatever goes.
    @Test func hostsKeepTheirIDs() {
        var index = QueueIndex()
        index.append(id: TransferID(1), rank: 0, batch: nil, state: .queued, host: "a")
        index.append(id: TransferID(2), rank: 1, batch: nil, state: .queued, host: "b")
        _ = index.remove([TransferID(1)])
        index.append(id: TransferID(3), rank: 2, batch: nil, state: .queued, host: "a")
        #expect(index.hosts == ["a", "b"])
        #expect(index.hostID("a") == 0)
        #expect(index.queuedPerHost == [0: 1, 1: 1])
        #expect(index.counts == [.queued: 2])
        // A state with none left is not counted (the scheduler and the header read the table as it is).
        index.set(.paused, batch: nil, at: 0)
        index.set(.paused, batch: nil, at: 1)
        #expect(index.counts == [.paused: 2])
        #expect(index.queuedPerHost.isEmpty)
    }

    @Test func theSlotBookCountsItsHoldersPerHost() {
        var random = Seeded(state: 99)
        var book = SlotBook()
        var model: [TransferID: Int32] = [:]
        for step in 0..<5_000 {
            let id = TransferID(Int64(random.below(300)))
            let host: Int32? = random.below(3) == 0 ? nil : Int32(random.below(6))
            book.set(id, host)
            model[id] = host
            #expect(book.holders == model, "step \(step)")
            #expect(book.perHost == Dictionary(grouping: model.values, by: { $0 }).mapValues(\.count), "step \(step)")
            #expect(book.violations().isEmpty)
        }
        #expect(book.isEmpty == model.isEmpty)
    }
}
