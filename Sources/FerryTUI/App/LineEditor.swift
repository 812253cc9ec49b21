import FerryCore

/// A one-line text field: insert at the cursor, Backspace/Delete, Left/Right/Home/End, ^U clears, ^W deletes a word.
/// A prefilled value may start selected (a limit's current value): what is typed then replaces it, Backspace,
/// Delete, ^U or ^W clear it, and a cursor key keeps it to edit.
public struct LineEditor: Sendable, Equatable {
    public private(set) var text: String
    /// The cursor, in characters from the start.
    public private(set) var cursor: Int
    /// The whole text is selected: the next edit replaces it.
    public private(set) var selected: Bool

    public init(_ text: String = "", selected: Bool = false) {
        self.text = text
        cursor = text.count
        self.selected = selected && !text.isEmpty
    }

    /// Applies an editing key; returns false when the key is not an editing key.
    /// Pasted text as the field takes it: lines and tabs become blanks (several URLs pasted one per line are
    /// several words); other control characters never enter the text.
    static func text(pasted: String) -> String {
        String(pasted.map { $0 == "\n" || $0 == "\r\n" || $0 == "\r" || $0 == "\t" ? " " : $0 }.filter { !TerminalSafe.isControl($0) })
    }

    public mutating func apply(_ key: Key) -> Bool {
        if selected {
            switch key {
            case .character, .paste, .backspace, .delete, .control("u"), .control("w"):
                text = ""
                cursor = 0
                selected = false
                switch key {
                case .character, .paste: return apply(key)
                default: return true
                }
            case .left, .right, .home, .end, .control("a"), .control("e"):
                selected = false
            default:
                return false
            }
        }
        var chars = Array(text)
        switch key {
        case let .paste(pasted):
            let words = Self.text(pasted: pasted)
            chars.insert(contentsOf: words, at: cursor)
            cursor += words.count
        case let .character(c):
            // Typed or pasted control characters never enter the text.
            guard !TerminalSafe.isControl(c) else { return true }
            chars.insert(c, at: cursor)
            cursor += 1
        case .backspace:
            guard cursor > 0 else { return true }
            chars.remove(at: cursor - 1)
            cursor -= 1
        case .delete:
            guard cursor < chars.count else { return true }
            chars.remove(at: cursor)
        case .left: cursor = max(0, cursor - 1)
        case .right: cursor = min(chars.count, cursor + 1)
        case .home, .control("a"): cursor = 0
        case .end, .control("e"): cursor = chars.count
        case .control("u"):
            chars.removeFirst(cursor)
            cursor = 0
        case .control("w"):
            var start = cursor
            while start > 0, chars[start - 1] == " " { start -= 1 }
            while start > 0, chars[start - 1] != " " { start -= 1 }
            chars.removeSubrange(start..<cursor)
            cursor = start
        default:
            return false
        }
        text = String(chars)
        return true
    }
}
