import FerryCore

/// Items marked for an action on many (m, M): marked one by one, or every item of a view (M: its states and
/// filter) but those unmarked since. Pause, resume, cancel, retry, remove and move act on the marks while there
/// are any; a view's marks are a Selection the engine resolves, so M on a view of a million rows costs what M
/// on ten does (the screen holds only a window of it).
public struct Marks: Sendable, Equatable {
    /// Marked one by one.
    public private(set) var ids: Set<TransferID> = []
    /// Every item of this view (its states and filter) is marked, but `except`.
    public private(set) var view: QueueView?
    public private(set) var except: Set<TransferID> = []
    /// Rows of `view` when it was marked: how many it marked.
    public private(set) var viewTotal = 0
    /// The highest id in the queue when the view was marked: items added since are not marked.
    public private(set) var upTo: Int64?

    public init() {}

    public var isEmpty: Bool { ids.isEmpty && view == nil }

    public func contains(_ item: TransferSnapshot) -> Bool {
        guard let view else { return ids.contains(item.id) }
        return item.id.rawValue <= upTo ?? .max && !except.contains(item.id) && Self.shows(view, item)
    }

    static func shows(_ view: QueueView, _ item: TransferSnapshot) -> Bool {
        view.matcher.matches(id: item.id, state: item.state, batch: item.batch, spec: item.spec, fileName: item.fileName)
    }

    /// Marks or unmarks the item; false when it is outside the view whose items are all marked (M clears them first).
    public mutating func toggle(_ item: TransferSnapshot) -> Bool {
        guard let view else {
            if ids.remove(item.id) == nil { ids.insert(item.id) }
            return true
        }
        guard Self.shows(view, item), item.id.rawValue <= upTo ?? .max else { return false }
        if except.remove(item.id) == nil { except.insert(item.id) }
        return true
    }

    /// Marks every item of `view` (`total` rows now) there is now, up to the item `upTo`.
    public mutating func markAll(of view: QueueView, total: Int, upTo: Int64?) {
        self = Marks()
        self.view = view.conditions
        viewTotal = total
        self.upTo = upTo
    }

    public mutating func clear() { self = Marks() }

    /// How many are marked: of a marked view, its rows when it was marked (items added since are not marked),
    /// but those unmarked.
    public var count: Int { view == nil ? ids.count : max(0, viewTotal - except.count) }

    /// The marked items, as a command names them.
    public var selection: Selection {
        if let view { return Selection(view: view, except: except.map(\.rawValue).sorted(), upTo: upTo) }
        return Selection(ids: ids.map(\.rawValue).sorted())
    }
}
