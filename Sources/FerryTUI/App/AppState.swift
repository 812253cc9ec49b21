import FerryCore

/// Everything the UI remembers between frames. The queue itself is not here: it comes in each frame as a snapshot.
public struct AppState: Sendable, Equatable {
    public enum Screen: Sendable, Equatable {
        case list
        case detail(TransferID)
        case help
    }

    public enum PromptKind: Sendable, Equatable {
        case downloadURL
        case uploadFile
        case uploadURL(path: String)
        /// The filter is applied as it is typed; Esc puts back `previous`.
        case filter(previous: String)
        case itemLimit(TransferID)
        case globalDownloadLimit
        case globalUploadLimit(download: Int64?)
    }

    public struct Prompt: Sendable, Equatable {
        public var kind: PromptKind
        public var editor = LineEditor()
        /// Why the last Enter was refused; shown above the prompt.
        public var error: String?

        public init(kind: PromptKind, editor: LineEditor = LineEditor(), error: String? = nil) {
            self.kind = kind
            self.editor = editor
            self.error = error
        }

        public var label: String {
            switch kind {
            case .downloadURL: return "Download URL: "
            case .uploadFile: return "Upload file: "
            case .uploadURL: return "Upload to URL: "
            case .filter: return "Filter: "
            case let .itemLimit(id): return "Limit of \(id) (e.g. 2M, 500K, off): "
            case .globalDownloadLimit: return "Global download limit (e.g. 2M, off): "
            case .globalUploadLimit: return "Global upload limit (e.g. 1M, off): "
            }
        }
    }

    public enum Confirmation: Sendable, Equatable {
        case remove(TransferID, name: String, deletePartial: Bool)
        case stopEngine(running: Int)

        public var question: String {
            switch self {
            case let .remove(id, name, false): return "Remove \(id) \(name) from the queue? (y/n)"
            case let .remove(id, name, true): return "Remove \(id) \(name) and delete its partial file? (y/n)"
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
    /// Case-insensitive substring of the item's name.
    public var filter = ""
    public var selectedID: TransferID?
    /// Where the selection was; used when the selected item leaves the view.
    public var selectedIndex = 0
    public var detailScroll = 0
    public var helpScroll = 0
    /// The message of the moment, shown in the footer until the next key.
    public var message: Message?
    /// Where `a` saves downloads.
    public var downloadDirectory: String
    /// The netrc file items added here use (nil: none).
    public var netrcFile: String?
    public var width: Int
    public var height: Int

    public init(downloadDirectory: String, width: Int = 80, height: Int = 24) {
        self.downloadDirectory = downloadDirectory
        self.width = width
        self.height = height
    }

    /// Rows of the list between the header and the footer.
    public var listHeight: Int { max(1, height - 2) }

    /// The items the list shows, in queue order.
    public func visibleItems(_ snapshot: QueueSnapshot) -> [TransferSnapshot] {
        if view == .all, filter.isEmpty { return snapshot.items }
        let needle = filter.lowercased()
        return snapshot.items.filter { item in
            view.includes(item.state) && (needle.isEmpty || item.displayName.lowercased().contains(needle))
        }
    }

    /// The index of the selected row in `items`: the selected item if it is there, else the row where it was.
    public func selectionIndex(in items: [TransferSnapshot]) -> Int? {
        guard !items.isEmpty else { return nil }
        // Where it was last time, unless the queue moved under it: no scan of a long queue on most frames.
        if let selectedID, items.indices.contains(selectedIndex), items[selectedIndex].id == selectedID { return selectedIndex }
        if let selectedID, let index = items.firstIndex(where: { $0.id == selectedID }) { return index }
        return min(max(0, selectedIndex), items.count - 1)
    }

    public func selectedItem(_ snapshot: QueueSnapshot) -> TransferSnapshot? {
        if case let .detail(id) = screen { return snapshot.items.first { $0.id == id } }
        let items = visibleItems(snapshot)
        return selectionIndex(in: items).map { items[$0] }
    }

    mutating func select(index: Int, in items: [TransferSnapshot]) {
        guard !items.isEmpty else {
            selectedID = nil
            selectedIndex = 0
            return
        }
        let clamped = min(max(0, index), items.count - 1)
        selectedIndex = clamped
        selectedID = items[clamped].id
    }
}
