/// A key press, decoded from curses (or built by a test).
public enum Key: Sendable, Hashable {
    case character(Character)
    case up, down, left, right, pageUp, pageDown, home, end
    case enter, escape, backspace, delete, tab
    /// Ctrl + a letter, e.g. `.control("u")`.
    case control(Character)
    /// Text the terminal marked as pasted (bracketed paste), as one event: never read as keys, whatever it
    /// holds (a line break in it is not Enter, a `p` in a URL does not pause).
    case paste(String)

    /// How the key is written in the help screen and the footer.
    public var label: String {
        switch self {
        case .character(" "): return "Space"
        case let .character(c): return String(c)
        case .up: return "↑"
        case .down: return "↓"
        case .left: return "←"
        case .right: return "→"
        case .pageUp: return "PgUp"
        case .pageDown: return "PgDn"
        case .home: return "Home"
        case .end: return "End"
        case .enter: return "Enter"
        case .escape: return "Esc"
        case .backspace: return "Bksp"
        case .delete: return "Del"
        case .tab: return "Tab"
        case let .control(c): return "^" + String(c).uppercased()
        case .paste: return "paste"
        }
    }

    /// The label without arrows, for a terminal that cannot show them.
    public var asciiLabel: String {
        switch self {
        case .up: return "Up"
        case .down: return "Down"
        case .left: return "Left"
        case .right: return "Right"
        default: return label
        }
    }
}
