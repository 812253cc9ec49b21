import FerryCore

/// An in-memory screen: a grid of cells that views draw into and `CursesTerminal` blits.
/// Tests compare it as text (`lines`), the way ratatui's TestBackend does.
public struct Canvas: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public private(set) var cells: [Cell]

    public init(width: Int, height: Int) {
        self.width = max(0, width)
        self.height = max(0, height)
        cells = Array(repeating: .blank, count: self.width * self.height)
    }

    public subscript(x: Int, y: Int) -> Cell {
        get { cells[y * width + x] }
        set { cells[y * width + x] = newValue }
    }

    /// Writes `text` at (x, y), clipped to `maxWidth` columns (and the canvas edge). Returns the column after the text.
    /// Controls are drawn as U+FFFD (a last line of defence: callers sanitize text from outside first);
    /// a wide character that does not fit is replaced by a space.
    @discardableResult
    public mutating func put(_ text: String, x: Int, y: Int, style: Style = .plain, maxWidth: Int? = nil) -> Int {
        guard y >= 0, y < height, x < width else { return x }
        let limit = min(width, x + (maxWidth ?? width))
        var col = x
        for c in text {
            let w = DisplayWidth.of(c)
            if w == 0 { continue }
            if col + w > limit {
                if col < limit, col >= 0 { self[col, y] = Cell(" ", style: style) }
                col = limit
                break
            }
            if col >= 0 {
                clearWideNeighbours(x: col, y: y, width: w)
                self[col, y] = Cell(Self.drawable(c), style: style)
                if w == 2 { self[col + 1, y] = Cell(" ", style: style, isContinuation: true) }
            }
            col += w
        }
        return col
    }

    /// Paints `count` cells with `character` in `style`.
    public mutating func fill(x: Int, y: Int, count: Int, character: Character = " ", style: Style = .plain) {
        guard y >= 0, y < height else { return }
        let start = max(0, x)
        let end = min(width, x + count)
        guard start < end else { return }
        for col in start..<end {
            clearWideNeighbours(x: col, y: y, width: 1)
            self[col, y] = Cell(character, style: style)
        }
    }

    /// Changes the style of a run of cells, keeping their characters (a selected row, say).
    public mutating func restyle(x: Int, y: Int, count: Int, _ change: (inout Style) -> Void) {
        guard y >= 0, y < height else { return }
        for col in max(0, x)..<min(width, x + count) {
            change(&cells[y * width + col].style)
        }
    }

    /// The screen as text, one string per row, trailing spaces kept (wide characters count once).
    public var lines: [String] {
        (0..<height).map { y in
            var line = ""
            for x in 0..<width where !self[x, y].isContinuation { line.append(self[x, y].character) }
            return line
        }
    }

    /// The screen as text with trailing spaces removed, rows joined by newlines: what screen tests compare.
    public var text: String {
        lines.map { line in
            var s = Substring(line)
            while s.last == " " { s = s.dropLast() }
            return String(s)
        }.joined(separator: "\n")
    }

    /// Overwriting half of a wide character leaves its other half as a space.
    private mutating func clearWideNeighbours(x: Int, y: Int, width w: Int) {
        if self[x, y].isContinuation, x > 0 { self[x - 1, y] = Cell(" ", style: self[x - 1, y].style) }
        let last = x + w - 1
        if last + 1 < width, self[last + 1, y].isContinuation { self[last + 1, y] = Cell(" ", style: self[last + 1, y].style) }
    }

    private static func drawable(_ c: Character) -> Character {
        TerminalSafe.isControl(c) ? "\u{FFFD}" : c
    }
}
