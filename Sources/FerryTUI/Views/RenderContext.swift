import FerryCore
import Foundation

/// What a frame is rendered with besides the state and the snapshot: the terminal's abilities and the clock.
public struct RenderContext: Sendable {
    /// false: the locale is not UTF-8; every glyph is ASCII and outside text is folded to ASCII before layout.
    public var unicode: Bool
    /// The time countdowns and "ago" are computed from; injected so tests are deterministic.
    public var now: Date
    public var keymap: Keymap

    public init(unicode: Bool = true, now: Date = Date(), keymap: Keymap = .standard) {
        self.unicode = unicode
        self.now = now
        self.keymap = keymap
    }

    /// Text from outside (a URL, a file name, a header, a body, an error) made safe to draw: controls, DEL and
    /// bidi overrides replaced; in ASCII mode every non-ASCII character becomes "?" before layout.
    public func outside(_ text: String) -> String {
        ascii(TerminalSafe.sanitize(text))
    }

    /// Our own text (which may hold arrows or ellipses) for this terminal.
    public func ascii(_ text: String) -> String {
        guard !unicode else { return text }
        guard !text.unicodeScalars.allSatisfy(\.isASCII) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            switch s {
            case "…": out.append(contentsOf: "...".unicodeScalars)
            case "↓": out.append("v")
            case "↑": out.append("^")
            case "←": out.append("<")
            case "→": out.append(">")
            case "·", "•": out.append("-")
            case "│": out.append("|")
            case "─": out.append("-")
            default:
                if s.isASCII { out.append(s) } else if s.properties.generalCategory != .nonspacingMark { out.append("?") }
            }
        }
        return String(out)
    }

    var ellipsis: String { unicode ? "…" : "~" }

    func directionGlyph(_ direction: Direction) -> String {
        switch direction {
        case .download: return unicode ? "↓" : "v"
        case .upload: return unicode ? "↑" : "^"
        }
    }

    func stateGlyph(_ state: TransferState) -> String {
        switch state {
        case .running: return unicode ? "▶" : ">"
        case .waiting: return unicode ? "↻" : "~"
        case .queued: return unicode ? "·" : "."
        case .paused: return unicode ? "‖" : "="
        case .completed: return unicode ? "✓" : "+"
        case .failed: return unicode ? "✗" : "x"
        case .cancelled: return unicode ? "⊘" : "-"
        }
    }
}

/// Colours by state, shared by the list and the detail view.
enum Palette {
    static func state(_ state: TransferState) -> Style {
        switch state {
        case .running: return Style(foreground: .green)
        case .waiting: return Style(foreground: .yellow)
        case .queued: return .plain
        case .paused: return Style(foreground: .blue)
        case .completed: return Style(foreground: .cyan)
        case .failed: return Style(foreground: .red, bold: true)
        case .cancelled: return Style(dim: true)
        }
    }

    static let header = Style(foreground: .white, background: .blue, bold: true, reverse: false)
    static let footerKey = Style(bold: true, reverse: true)
    static let error = Style(foreground: .red, bold: true)
    static let question = Style(foreground: .yellow, bold: true)
    static let label = Style(bold: true)
    static let dim = Style(dim: true)
    /// A marked row's mark and name.
    static let marked = Style(foreground: .yellow, bold: true)
}
