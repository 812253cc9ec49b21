import FerryCore

/// Every key binding of the list and detail screens, in one table: it dispatches keys, and the help
/// screen and the footer are generated from it, so the three cannot drift apart (htop's Action.c).
public struct Keymap: Sendable {
    public struct Binding: Sendable {
        public var keys: [Key]
        public var action: Action
        /// One line in the help screen.
        public var help: String
        /// The short label in the footer; nil keeps the binding out of the footer.
        public var footer: String?
        public var section: Section
    }

    public enum Section: String, Sendable, CaseIterable {
        case move = "Move"
        case transfers = "Transfers"
        case marks = "Marks"
        case queue = "Queue"
        case screens = "Screens"
    }

    public let bindings: [Binding]

    public static let standard = Keymap(bindings: [
        Binding(keys: [.up, .character("k")], action: .selectUp, help: "select the previous item", footer: nil, section: .move),
        Binding(keys: [.down, .character("j")], action: .selectDown, help: "select the next item", footer: nil, section: .move),
        Binding(keys: [.pageUp], action: .pageUp, help: "a page up", footer: nil, section: .move),
        Binding(keys: [.pageDown], action: .pageDown, help: "a page down", footer: nil, section: .move),
        Binding(keys: [.character("g"), .home], action: .selectFirst, help: "first item", footer: nil, section: .move),
        Binding(keys: [.character("G"), .end], action: .selectLast, help: "last item", footer: nil, section: .move),
        Binding(keys: [.character(" "), .character("p")], action: .togglePause, help: "pause or resume the item", footer: "Pause", section: .transfers),
        Binding(keys: [.character("P")], action: .togglePauseAll, help: "pause or resume everything", footer: nil, section: .transfers),
        Binding(keys: [.character("c")], action: .cancel, help: "cancel the item", footer: "Cancel", section: .transfers),
        Binding(keys: [.character("r")], action: .retry, help: "retry failed or cancelled", footer: "Retry", section: .transfers),
        Binding(keys: [.character("d"), .delete], action: .remove, help: "remove the item (asks)", footer: "Remove", section: .transfers),
        Binding(keys: [.character("m")], action: .mark, help: "mark or unmark the item", footer: nil, section: .marks),
        Binding(keys: [.character("M")], action: .markAll, help: "mark all in view, or none", footer: nil, section: .marks),
        Binding(keys: [.character("R")], action: .retryFailed, help: "retry failed in the view", footer: nil, section: .marks),
        Binding(keys: [.character("X")], action: .clearFinished, help: "clear done items (asks)", footer: nil, section: .marks),
        Binding(keys: [.character("D")], action: .removeDeletingPartial, help: "remove + delete .part file", footer: nil, section: .transfers),
        Binding(keys: [.character("a")], action: .addDownload, help: "add a download (URL)", footer: "Add", section: .queue),
        Binding(keys: [.character("u")], action: .addUpload, help: "add an upload (file, URL)", footer: "Upload", section: .queue),
        Binding(keys: [.character("J")], action: .moveItemDown, help: "move the item down", footer: nil, section: .queue),
        Binding(keys: [.character("K")], action: .moveItemUp, help: "move the item up", footer: nil, section: .queue),
        Binding(keys: [.character("+")], action: .concurrencyUp, help: "one more transfer at once", footer: nil, section: .queue),
        Binding(keys: [.character("-")], action: .concurrencyDown, help: "one transfer fewer at once", footer: nil, section: .queue),
        Binding(keys: [.character("l")], action: .limitItem, help: "rate limit of the item", footer: nil, section: .queue),
        Binding(keys: [.character("L")], action: .limitGlobal, help: "global rate limits", footer: nil, section: .queue),
        Binding(keys: [.enter], action: .openDetail, help: "details, or a tree's files", footer: "Detail", section: .screens),
        Binding(keys: [.escape], action: .back, help: "back; clear marks, filter", footer: nil, section: .screens),
        Binding(keys: [.character("/")], action: .filter, help: "filter (name, URL, #id)", footer: "Filter", section: .screens),
        Binding(keys: [.character("s")], action: .cycleSort, help: "next sort (name, rate...)", footer: nil, section: .screens),
        Binding(keys: [.character("1")], action: .showView(.all), help: "view: all", footer: nil, section: .screens),
        Binding(keys: [.character("2")], action: .showView(.active), help: "view: active", footer: nil, section: .screens),
        Binding(keys: [.character("3")], action: .showView(.queued), help: "view: queued and paused", footer: nil, section: .screens),
        Binding(keys: [.character("4")], action: .showView(.done), help: "view: done", footer: nil, section: .screens),
        Binding(keys: [.character("5")], action: .showView(.failed), help: "view: failed and cancelled", footer: nil, section: .screens),
        Binding(keys: [.character("?")], action: .help, help: "this help", footer: "Help", section: .screens),
        Binding(keys: [.character("q")], action: .quit, help: "detach (transfers go on)", footer: "Detach", section: .screens),
        Binding(keys: [.character("Q")], action: .stopEngine, help: "stop the engine (asks)", footer: nil, section: .screens),
    ])

    public func action(for key: Key) -> Action? {
        bindings.first { $0.keys.contains(key) }?.action
    }

    /// Footer entries in table order: the first key and the short label.
    public var footerEntries: [(key: Key, label: String)] { footerEntries(onList: true) }

    /// The footer's keys; off the list, those that act on the list only (Enter's details, the filter) are left out.
    /// `selected`: the state of the item the keys would act on: what does not apply to it is not offered
    /// (`Space Pause` on a done item), and Space says `Resume` for a paused one.
    public func footerEntries(onList: Bool, selected: TransferState? = nil) -> [(key: Key, label: String)] {
        let listOnly: [Action] = [.openDetail, .filter]
        var entries: [(key: Key, label: String)] = bindings.compactMap { b in
            guard onList || !listOnly.contains(b.action), var label = b.footer else { return nil }
            if let selected {
                switch b.action {
                case .togglePause:
                    if !StateChange.pause.applies(to: selected) {
                        guard StateChange.resume.applies(to: selected) else { return nil }
                        label = "Resume"
                    }
                case .cancel where !StateChange.cancel.applies(to: selected), .retry where !StateChange.retry.applies(to: selected):
                    return nil
                default:
                    break
                }
            }
            return (key: b.keys[0], label: label)
        }
        // Help first and Quit last, as htop does; the rest keep table order.
        if let help = entries.firstIndex(where: { $0.label == "Help" }) { entries.insert(entries.remove(at: help), at: 0) }
        return entries
    }
}
