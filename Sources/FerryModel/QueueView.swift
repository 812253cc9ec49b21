import Foundation

/// Which rows of the queue a client sees: a view (the items in some states, matching a filter, or named by
/// id), in queue order, and a window of it (`offset`, `limit` rows). The engine sends a subscriber its window
/// and the queue's counts, then only what changed inside the window (and the counts): a client's cost follows
/// what it shows, not the queue's length.
public struct QueueView: Sendable, Codable, Equatable, Hashable {
    /// nil: every state.
    public var states: [TransferState]?
    /// Case-insensitive text found in the item's name, URL or host, or `#id` (nil or empty: no filter).
    public var filter: String?
    /// Only these items (a follower's own).
    public var ids: [Int64]?
    /// Only the items of this batch.
    public var batch: Int64?
    /// Each tree (a batch `get -r`/`put -r` queued) is one row with its items' sums (TransferSnapshot.tree),
    /// where its first item in the view would be (nil: false). A view of one batch shows its files.
    public var treesAsRows: Bool?
    /// The first row of the window, counted in the view.
    public var offset: Int
    /// Rows of the window; nil: to the end of the view.
    public var limit: Int?
    /// The item whose details are shown: it alone comes with its rate history (the list needs none).
    public var detail: Int64?
    /// The rows' order (nil: the queue's).
    public var sort: QueueSort?
    /// An item whose row in the view the window says (QueueWindow.aroundRow): a client keeps its selection
    /// when the view changes under it (a filter cleared).
    public var around: Int64?

    public init(states: [TransferState]? = nil, filter: String? = nil, ids: [Int64]? = nil, batch: Int64? = nil,
                offset: Int = 0, limit: Int? = nil, detail: Int64? = nil, sort: QueueSort? = nil, treesAsRows: Bool = false) {
        self.detail = detail
        self.treesAsRows = treesAsRows ? true : nil
        self.sort = sort == .queue ? nil : sort
        self.states = states
        self.filter = filter
        self.ids = ids
        self.batch = batch
        self.offset = offset
        self.limit = limit
    }

    /// The whole queue.
    public static let everything = QueueView()

    /// A compiled form for walking many items.
    public struct Matcher: Sendable {
        let states: Set<TransferState>?
        let needle: [UInt8]?
        let ids: Set<Int64>?
        let batch: Int64?

        /// A filter's text, as lowercase bytes (nil: none).
        public var needleBytes: [UInt8]? { needle }

        /// Whether an item with these properties is in the view. For a filter, `name` (a file name or an
        /// upload's source, when known) and `url` (as the user gave it) are asked for, and matched ignoring
        /// ASCII case; a download's name not known yet is the end of its URL, matched there.
        public func matches(id: TransferID, state: TransferState, batch: Int64?, name: () -> String?, url: () -> String) -> Bool {
            if let states, !states.contains(state) { return false }
            if let ids, !ids.contains(id.rawValue) { return false }
            if let wanted = self.batch, wanted != batch { return false }
            guard let needle else { return true }
            if needle.first == UInt8(ascii: "#") { return "#\(id.rawValue)".utf8.elementsEqual(needle) }
            if let name = name(), Self.contains(name, needle) { return true }
            return Self.contains(url(), needle)
        }

        /// The same for an item as a snapshot or a stored record has it: its name as known, its URL as given.
        public func matches(id: TransferID, state: TransferState, batch: Int64?, spec: TransferSpec, fileName: String?) -> Bool {
            matches(id: id, state: state, batch: batch, name: { TransferSnapshot.knownName(spec: spec, fileName: fileName) },
                    url: { spec.url.absoluteString })
        }

        /// `text` holds `needle` (lowercase bytes), ASCII letters of `text` compared in lowercase; no copy of
        /// `text` (a filter over a million items runs this a million times).
        static func contains(_ text: String, _ needle: [UInt8]) -> Bool {
            var text = text
            return text.withUTF8 { hay in
                guard let first = needle.first, needle.count <= hay.count else { return needle.isEmpty }
                @inline(__always) func lower(_ byte: UInt8) -> UInt8 { byte &- 65 < 26 ? byte | 0x20 : byte }
                var i = 0
                while i <= hay.count - needle.count {
                    if lower(hay[i]) == first {
                        var j = 1
                        while j < needle.count, lower(hay[i + j]) == needle[j] { j += 1 }
                        if j == needle.count { return true }
                    }
                    i += 1
                }
                return false
            }
        }
    }

    public var matcher: Matcher {
        let text = filter?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        return Matcher(states: states.map(Set.init), needle: text.isEmpty ? nil : Array(text.utf8), ids: ids.map(Set.init), batch: batch)
    }

    /// No condition: every item is a row, in queue order.
    public var selectsAll: Bool {
        states == nil && (filter ?? "").trimmingCharacters(in: .whitespaces).isEmpty && ids == nil && batch == nil && sort == nil
    }

    /// Whether trees are rows of their own in this view (none are in a view of one batch or of named items).
    public var groupsTrees: Bool { treesAsRows == true && batch == nil && ids == nil }

    /// Which items the view shows (states, filter, ids, batch) and whether trees are rows, without its order,
    /// window or detail.
    public var conditions: QueueView {
        QueueView(states: states, filter: filter, ids: ids, batch: batch, treesAsRows: treesAsRows == true)
    }

    /// The rows of the window among `count` rows of the view.
    public func window(among count: Int) -> Range<Int> {
        let start = min(max(0, offset), count)
        return start..<(limit.map { min(count, start + max(0, $0)) } ?? count)
    }

    /// Whether the view's row `index` is in the window.
    public func windowContains(_ index: Int) -> Bool {
        index >= offset && (limit.map { index < offset + $0 } ?? true)
    }
}

/// Where a window sits in its view, and which view it is of (a client that asked for another view meanwhile
/// knows these rows are not the ones it wants).
public struct QueueWindow: Sendable, Codable, Equatable {
    /// The view's row of the window's first item.
    public var offset: Int
    /// Rows in the whole view.
    public var total: Int
    /// The view's states and filter.
    public var states: [TransferState]?
    public var filter: String?
    public var sort: QueueSort?
    /// The view's batch, and whether its trees are rows (QueueView.treesAsRows).
    public var batch: Int64?
    public var treesAsRows: Bool?
    /// In a view of every item: the row of the first running item (where a screen opens on a long queue of
    /// finished files), nil when none runs.
    public var firstRunning: Int?
    /// The view's `around` item, and its row (nil when the view does not show it).
    public var around: Int64?
    public var aroundRow: Int?

    public init(offset: Int, total: Int, of view: QueueView? = nil) {
        self.offset = offset
        self.total = total
        self.states = view?.states
        self.filter = view?.filter
        self.sort = view?.sort
        self.batch = view?.batch
        self.treesAsRows = view?.treesAsRows
    }

    /// Whether these rows answer `view` (its states, filter, batch, trees and order; the window may sit elsewhere).
    public func answers(_ view: QueueView) -> Bool {
        states == view.states && filter == view.filter && sort == view.sort && batch == view.batch
            && (treesAsRows ?? false) == (view.treesAsRows ?? false)
    }
}
