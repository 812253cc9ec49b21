/// The eight ANSI colours, or the terminal's own.
public enum TerminalColor: UInt8, Sendable, Hashable, CaseIterable {
    case black, red, green, yellow, blue, magenta, cyan, white
    case standard  // the terminal's default (use_default_colors: -1)
}

/// How a cell looks. Colours are dropped at blit time when colour is off (NO_COLOR, a monochrome terminal).
public struct Style: Sendable, Hashable {
    public var foreground: TerminalColor = .standard
    public var background: TerminalColor = .standard
    public var bold = false
    public var dim = false
    public var reverse = false
    public var underline = false

    public init(foreground: TerminalColor = .standard, background: TerminalColor = .standard,
                bold: Bool = false, dim: Bool = false, reverse: Bool = false, underline: Bool = false) {
        self.foreground = foreground
        self.background = background
        self.bold = bold
        self.dim = dim
        self.reverse = reverse
        self.underline = underline
    }

    public static let plain = Style()

    public func with(_ change: (inout Style) -> Void) -> Style {
        var copy = self
        change(&copy)
        return copy
    }
}
