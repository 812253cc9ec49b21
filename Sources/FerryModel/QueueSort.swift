import Foundation

/// The order a view's rows are shown in: the queue's own, or by name, progress, rate, state or time added
/// (a screen's `s` cycles them). Sorting shows the rows in another order; the queue's order (what runs
/// next) does not change. One rule for the engine (which sorts the rows it sends) and a screen holding the
/// whole queue.
public enum QueueSort: String, Sendable, Codable, CaseIterable {
    case queue, name, progress, rate, state, added

    /// The next in the cycle.
    public var next: QueueSort {
        let all = Self.allCases
        return all[(all.firstIndex(of: self)! + 1) % all.count]
    }

    /// What an item is sorted on: what the rule needs to know of it.
    public struct Key: Sendable {
        public var id: TransferID
        public var state: TransferState
        /// The name shown.
        public var name: String
        /// Done of expected, 0 to 1 (nil: size not known).
        public var progress: Float?
        /// Bytes per second while it runs.
        public var rate: Double?

        public init(id: TransferID, state: TransferState, name: String, progress: Float?, rate: Double?) {
            self.id = id
            self.state = state
            self.name = name
            self.progress = progress
            self.rate = rate
        }

        /// The key of an item as a snapshot or a loaded transfer has it.
        public init(id: TransferID, state: TransferState, spec: TransferSpec, fileName: String?, bytesDone: Int64, bytesExpected: Int64?,
                    rate: Double?) {
            self.init(id: id, state: state, url: spec.url, knownName: TransferSnapshot.knownName(spec: spec, fileName: fileName),
                      bytesDone: bytesDone, bytesExpected: bytesExpected, rate: rate)
        }

        /// The key of an item as the store keeps it (QueueStore.forEachSortKey).
        public init(id: TransferID, state: TransferState, url: URL, knownName: String?, bytesDone: Int64, bytesExpected: Int64?, rate: Double?) {
            self.init(id: id, state: state, name: TransferSnapshot.displayName(url: url, knownName: knownName),
                      progress: bytesExpected.flatMap { $0 > 0 ? Float(bytesDone) / Float($0) : nil }, rate: rate)
        }
    }

    /// Whether `a` comes before `b`; nil when this sort does not tell them apart (then the queue's order
    /// decides). Name A to Z; progress the furthest along first, finished items last; rate the fastest first;
    /// state what runs first, then what waits, is queued, paused, failed, cancelled, done; added the newest first.
    public func precedes(_ a: Key, _ b: Key) -> Bool? {
        switch self {
        case .queue:
            return nil
        case .name:
            // A copy's number ("990 (1).bin", FileNaming.numbered) sorts after its original, not before it
            // (a blank comes before a dot).
            let (nameA, copyA) = Self.unnumbered(a.name), (nameB, copyB) = Self.unnumbered(b.name)
            let order = nameA.compare(nameB, options: [.caseInsensitive, .numeric])
            if order != .orderedSame { return order == .orderedAscending }
            if copyA != copyB { return copyA < copyB }
            let exact = a.name.compare(b.name, options: [.caseInsensitive, .numeric])
            return exact == .orderedSame ? nil : exact == .orderedAscending
        case .progress:
            let doneA = a.state == .completed, doneB = b.state == .completed
            if doneA != doneB { return doneB }
            let pa = a.progress ?? 0, pb = b.progress ?? 0
            return pa == pb ? nil : pa > pb
        case .rate:
            let ra = a.state == .running ? a.rate ?? 0 : -1, rb = b.state == .running ? b.rate ?? 0 : -1
            return ra == rb ? nil : ra > rb
        case .state:
            let ra = Self.stateOrder.firstIndex(of: a.state)!, rb = Self.stateOrder.firstIndex(of: b.state)!
            return ra == rb ? nil : ra < rb
        case .added:
            return a.id == b.id ? nil : a.id > b.id
        }
    }

    /// A name without the number FileNaming.numbered gave a copy ("990 (2).bin" -> "990.bin", 2; 0 for none).
    static func unnumbered(_ name: String) -> (name: String, copy: Int) {
        let (stem, ext) = FileNaming.splitExtension(name)
        guard stem.hasSuffix(")"), let open = stem.range(of: " (", options: .backwards),
              let copy = Int(stem[open.upperBound..<stem.index(before: stem.endIndex)]), copy > 0 else { return (name, 0) }
        return (String(stem[..<open.lowerBound]) + ext, copy)
    }

    static let stateOrder: [TransferState] = [.running, .waiting, .queued, .paused, .failed, .cancelled, .completed]

    /// `items` in this order, ties in the order given (the queue's).
    public func sorted<Item>(_ items: [Item], key: (Item) -> Key) -> [Item] {
        guard self != .queue else { return items }
        let keyed = items.enumerated().map { (offset: $0.offset, key: key($0.element), item: $0.element) }
        return keyed.sorted { a, b in precedes(a.key, b.key) ?? (a.offset < b.offset) }.map(\.item)
    }
}

extension TransferSnapshot {
    /// What a sort compares of this item.
    public var sortKey: QueueSort.Key {
        QueueSort.Key(id: id, state: state, spec: spec, fileName: fileName, bytesDone: bytesDone, bytesExpected: bytesExpected,
                      rate: bytesPerSecond)
    }
}
