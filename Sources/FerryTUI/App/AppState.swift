import FerryCore
import Foundation

/// Everything the UI remembers between frames. The queue itself is not here: it comes in each frame as a snapshot.
public struct AppState: Sendable, Equatable {
    public enum Screen: Sendable, Equatable {
        case list
        case detail(TransferID)
        case help
    }

    public enum PromptKind: Sendable, Equatable {
        case downloadURL
        /// The folder `a` saves into, changed from its URL prompt (Tab); the URL typed so far comes back.
        case downloadFolder(url: String)
        case uploadFile
        case uploadURL(path: String, shape: UploadShape)
        /// The filter is applied as it is typed; Esc puts back `previous`.
        case filter(previous: String)
        case itemLimit(TransferID)
        /// Each file of a tree (its batch), from the tree's row.
        case treeLimit(batch: Int64, name: String)
        case globalDownloadLimit
        case globalUploadLimit(download: Int64?)

        /// The folder a download saves into.
        var isFolder: Bool {
            if case .downloadFolder = self { return true }
            return false
        }
    }

    public struct Prompt: Sendable, Equatable {
        public var kind: PromptKind
        public var editor = LineEditor()
        /// Why the last Enter was refused; shown above the prompt.
        public var error: String?
        /// What Tab found (the paths it could complete to); shown above the prompt.
        public var hint: String?

        public init(kind: PromptKind, editor: LineEditor = LineEditor(), error: String? = nil) {
            self.kind = kind
            self.editor = editor
            self.error = error
        }

        /// The prompt's words; `folder`: where `a` saves (its label says so).
        public func label(folder: String) -> String {
            switch kind {
            case .downloadURL: return "Download URL (into \(folder); Tab: another folder): "
            case .downloadFolder: return "Save into (Tab completes): "
            case .uploadFile: return "Upload file (Tab completes): "
            case let .uploadURL(_, shape): return "Upload to URL (\(shape.title); Tab: \(shape.next.title)): "
            case .filter: return "Filter: "
            case let .itemLimit(id): return "Limit of \(id) (e.g. 2M, 500K, off): "
            case let .treeLimit(_, name): return "Limit of \(name), its files together (e.g. 2M, 500K, off): "
            case .globalDownloadLimit: return "Global download limit (e.g. 2M, off): "
            case .globalUploadLimit: return "Global upload limit (e.g. 1M, off): "
            }
        }
    }

    public enum Confirmation: Sendable, Equatable {
        case remove(TransferID, name: String, deletePartial: Bool)
        /// The marked items (`count` of them).
        case removeMarked(Selection, count: Int, deletePartial: Bool)
        /// A tree's whole batch (`count` files) from its row.
        case removeTree(Selection, name: String, count: Int, deletePartial: Bool)
        /// The finished items of the view (`count` when known); their files stay.
        case clearFinished(Selection, count: Int?)
        case stopEngine(running: Int)

        public var question: String {
            switch self {
            case let .remove(id, name, false): return "Remove \(id) \(name) from the queue? (y/n)"
            case let .remove(id, name, true): return "Remove \(id) \(name) and delete its partial file? (y/n)"
            case let .removeMarked(_, count, deletePartial):
                return "Remove the \(count) marked item\(count == 1 ? "" : "s") from the queue\(deletePartial ? " and delete their partial files" : "")? (y/n)"
            case let .removeTree(_, name, count, deletePartial):
                return "Remove the tree \(name) (\(count) file\(count == 1 ? "" : "s")) from the queue\(deletePartial ? " and delete their partial files" : "")? Files done stay. (y/n)"
            case let .clearFinished(_, count):
                let what = count.map { "the \($0) finished item\($0 == 1 ? "" : "s")" } ?? "the finished items"
                return "Clear \(what) of this view from the list? Their files stay. (y/n)"
            case let .stopEngine(running) where running > 0:
                return "Stop the engine and its \(running) running transfer\(running == 1 ? "" : "s")? Partial files are kept. (y/n)"
            case .stopEngine:
                return "Stop the engine? (y/n)"
            }
        }
    }

    public struct Message: Sendable, Equatable {
        public var text: String
        public var isError: Bool
    }

    public var screen: Screen = .list
    public var prompt: Prompt?
    public var confirmation: Confirmation?
    public var view: ListView = .all
    /// The tree whose files the list shows (Enter on a tree's row; Esc goes back to its row), nil: trees are rows.
    public var openTree: OpenTree?

    public struct OpenTree: Sendable, Equatable {
        public var batch: Int64
        /// The tree's name (TreeRow.name), for the header.
        public var name: String
        /// The tree's row when it was opened: the selection goes back to it.
        public var row: TransferID
    }
    /// Case-insensitive substring of the item's name.
    public var filter = ""
    /// The rows' order (s cycles it); the queue's own order is not changed by it.
    public var sort = QueueSort.queue
    public var selectedID: TransferID?
    /// Items marked for an action on many (m, M).
    public var marks = Marks()
    /// Where the selection was; used when the selected item leaves the view.
    public var selectedIndex = 0
    /// Enter was pressed on a row whose window had not come yet: its details open when it comes.
    public var openWhenHeld = false
    public var detailScroll = 0
    public var helpScroll = 0
    /// The transfers-at-once value last asked of the engine, and the value the snapshot showed then: until the
    /// snapshot shows another, presses of + and - count from what was asked, so that quick presses add up.
    public var concurrencyAsked: ConcurrencyAsk?
    /// The first rows have come and the selection was placed on what is active (openOnActive).
    public var opened = false
    /// The total rate (down and up) once a second while frames are drawn, the last minute of it: the header's
    /// graph. Nothing is sampled while nothing moves (no frame is drawn then).
    public var rateHistory: [Double] = []
    var rateSecond = 0

    /// Takes the snapshot's total rate as this second's sample (once a second).
    public mutating func sampleRate(_ snapshot: QueueSnapshot, second: Int) {
        guard second != rateSecond else { return }
        // Seconds with no frame drawn (nothing moved, nothing was drawn) were quiet: they count as such, so
        // the history is of the last seconds, not of the last frames.
        if rateSecond > 0, second > rateSecond + 1 {
            rateHistory += Array(repeating: 0, count: min(60, second - rateSecond - 1))
        }
        rateSecond = second
        rateHistory.append(snapshot.totals.downloadBytesPerSecond + snapshot.totals.uploadBytesPerSecond)
        if rateHistory.count > 60 { rateHistory.removeFirst(rateHistory.count - 60) }
    }

    public struct ConcurrencyAsk: Sendable, Equatable {
        public var shown: Int
        public var asked: Int
    }
    /// The message of the moment, shown in the footer until the next key.
    public var message: Message?
    /// Where `a` saves downloads (its prompt shows it; Tab there changes it).
    /// The UI asks something (a prompt or a question): Esc, and Ctrl-C, leave it.
    public var isAsking: Bool { prompt != nil || confirmation != nil }

    public var downloadDirectory: String
    /// What relative paths typed in prompts are relative to (the process's).
    public var workingDirectory: String
    /// The netrc file items added here use (nil: none).
    public var netrcFile: String?
    /// The ssh-agent sftp and scp items added here log in with (TransferSpec.sshAgent; nil: the engine's).
    public var sshAgent: String?
    public var width: Int
    public var height: Int

    public init(downloadDirectory: String, width: Int = 80, height: Int = 24,
                workingDirectory: String = FileManager.default.currentDirectoryPath) {
        self.downloadDirectory = downloadDirectory
        self.workingDirectory = workingDirectory
        self.width = width
        self.height = height
    }

    /// How `u` sends the file: the same choices as `ferry put` (PUT, `-X POST`, `-F`).
    public enum UploadShape: Sendable, Equatable, CaseIterable {
        case put, post, form

        public var title: String {
            switch self {
            case .put: return "PUT"
            case .post: return "POST"
            case .form: return "POST form"
            }
        }

        public var next: UploadShape {
            let all = Self.allCases
            return all[(all.firstIndex(of: self)! + 1) % all.count]
        }
    }

    /// Rows of the list between the header and the footer.
    public var listHeight: Int { max(1, height - 2) }
    /// The row at the top of the list when it was last drawn (the list scrolls from there: `firstRow`).
    public var listTop = 0

    /// The row at the top of the list now: from where it was, as far as keeps the selection on screen.
    public func firstRow(_ rows: ListRows) -> Int {
        TransferList.firstRow(selected: selectionIndex(in: rows) ?? 0, rows: listHeight, count: rows.total, previous: listTop)
    }

    /// The list's rows: the view's window the engine sent (an engine behind its socket), or the whole view
    /// filtered here (an engine in this process). One rule for what matches: QueueView.
    public func rows(_ snapshot: QueueSnapshot) -> ListRows {
        if let window = snapshot.window {
            // Rows of the view before a key changed it (1-5, the filter): none yet of the one asked for.
            guard window.answers(queueView) else { return ListRows(items: [], offset: 0, total: 0, pending: true) }
            return ListRows(items: snapshot.items, offset: window.offset, total: window.total)
        }
        if view == .all, filter.isEmpty, sort == .queue { return ListRows(items: snapshot.items, offset: 0, total: snapshot.items.count) }
        let matcher = queueView.matcher
        let items = snapshot.items.filter { item in
            matcher.matches(id: item.id, state: item.state, batch: item.batch, spec: item.spec, fileName: item.fileName)
        }
        return ListRows(items: sort.sorted(items, key: \.sortKey), offset: 0, total: items.count)
    }

    /// The items the list has, in queue order (a window of the view when the engine sends windows).
    public func visibleItems(_ snapshot: QueueSnapshot) -> [TransferSnapshot] { rows(snapshot).items }

    /// What the list shows, as the engine is asked for it: the view's states and the filter.
    public var queueView: QueueView {
        var queueView = QueueView(states: view.states, filter: filter.isEmpty ? nil : filter, batch: openTree?.batch, sort: sort,
                                  treesAsRows: openTree == nil)
        if case let .detail(id) = screen { queueView.detail = id.rawValue }
        return queueView
    }

    /// The items of the view shown (its states and filter) that are in one of `states`; nil when the view
    /// shows none of those states.
    public func viewSelection(in states: [TransferState]) -> Selection? {
        let shown = (queueView.states ?? TransferState.allCases).filter(states.contains)
        guard !shown.isEmpty else { return nil }
        return Selection(states: shown, batch: queueView.batch, filter: queueView.filter)
    }

    /// The view with the window the list needs now: the screenful at the selection, and a screenful either
    /// side, so that moving the selection a little needs no new window.
    public func wantedView(_ rows: ListRows) -> QueueView {
        var wanted = queueView
        let first = firstRow(rows)
        wanted.offset = max(0, first - listHeight)
        wanted.limit = listHeight * 3
        // The selected item is not among the rows held (the view changed under it): the engine says its row.
        if let selectedID, rows.index(of: selectedID) == nil { wanted.around = selectedID.rawValue }
        return wanted
    }

    /// Whether `held` (the window the engine sends) covers the screenful `rows` needs for the view asked.
    public func windowCovers(_ held: QueueView, _ rows: ListRows) -> Bool {
        let asked = queueView
        guard held.states == asked.states, held.filter == asked.filter, held.sort == asked.sort, held.detail == asked.detail,
              held.batch == asked.batch, held.treesAsRows == asked.treesAsRows else { return false }
        let first = firstRow(rows)
        let last = min(rows.total, first + listHeight)
        return held.windowContains(first) && (last == first || held.windowContains(last - 1))
    }

    /// The index (in the whole view) of the selected row: the selected item if the rows hold it, else the row
    /// where it was.
    /// A screen opening on a queue starts on what is active: the first running item (the top when nothing runs),
    /// not the top of thousands of finished ones. Once, before any key: `opened` keeps it from moving later.
    public mutating func openOnActive(_ snapshot: QueueSnapshot) {
        guard !opened else { return }
        if let window = snapshot.window {
            guard window.answers(queueView) else { return }  // the view's rows are on their way
            if selectedID == nil, selectedIndex == 0, let first = window.firstRunning { selectedIndex = first }
        } else {
            guard !snapshot.items.isEmpty else { return }  // nothing has come yet
            guard selectedID == nil, selectedIndex == 0 else { opened = true; return }
            let rows = rows(snapshot)
            if let first = (0..<rows.total).first(where: { rows[$0]?.state == .running }) { selectedIndex = first }
        }
        opened = true
    }

    public func selectionIndex(in rows: ListRows) -> Int? {
        guard rows.total > 0 else { return nil }
        // Where it was last time, unless the queue moved under it: no scan of a long queue on most frames.
        if let selectedID, rows[selectedIndex]?.id == selectedID { return selectedIndex }
        if let selectedID, let index = rows.index(of: selectedID) { return index }
        return min(max(0, selectedIndex), rows.total - 1)
    }

    /// The selected item is not in the view shown (a filter left it out): the row shown in its place is the
    /// selection, so that clearing the filter stays there (it went back to an item the filtered view never showed).
    mutating func selectShownRow(_ rows: ListRows) {
        guard let index = selectionIndex(in: rows), let item = rows[index] else { return }
        selectedIndex = index
        selectedID = item.id
    }

    public func selectedItem(_ snapshot: QueueSnapshot) -> TransferSnapshot? {
        if case let .detail(id) = screen { return snapshot.items.first { $0.id == id } }
        let rows = rows(snapshot)
        return selectionIndex(in: rows).flatMap { rows[$0] }
    }

    /// Enter on a row: a tree's opens to its files (Esc comes back to it), an item's to its details.
    public mutating func open(_ item: TransferSnapshot) {
        if let tree = item.tree {
            openTree = .init(batch: tree.batch, name: TerminalSafe.sanitize(tree.name), row: item.id)
            selectedIndex = 0
            selectedID = nil
        } else {
            screen = .detail(item.id)
            detailScroll = 0
        }
    }

    mutating func select(index: Int, in rows: ListRows) {
        guard rows.total > 0 else {
            selectedID = nil
            // A view whose rows are on their way: the place is kept (G: the end), and found when they come.
            selectedIndex = rows.pending ? max(0, index) : 0
            return
        }
        let clamped = min(max(0, index), rows.total - 1)
        selectedIndex = clamped
        // A row outside the window is known once its window comes (the app asks for it).
        selectedID = rows[clamped]?.id
    }
}

/// The rows of the list the UI holds: `items` are the view's rows from `offset` on, of `total` in the view.
/// Indices count in the whole view; a row outside what is held is nil until its window comes.
public struct ListRows: Sendable, Equatable {
    public let items: [TransferSnapshot]
    public let offset: Int
    public let total: Int
    /// The view was just changed: its rows have not come yet.
    public let pending: Bool

    public init(items: [TransferSnapshot], offset: Int, total: Int, pending: Bool = false) {
        self.items = items
        self.offset = offset
        self.total = total
        self.pending = pending
    }

    public subscript(index: Int) -> TransferSnapshot? {
        let local = index - offset
        return items.indices.contains(local) ? items[local] : nil
    }

    public func index(of id: TransferID) -> Int? {
        items.firstIndex { $0.id == id }.map { $0 + offset }
    }
}
