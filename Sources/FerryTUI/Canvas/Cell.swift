/// One terminal cell. A wide character occupies its cell and the next one, which is a `continuation`.
public struct Cell: Sendable, Hashable {
    public var character: Character
    public var style: Style
    /// The right half of a double-width character on the left: never drawn on its own.
    public var isContinuation: Bool

    public init(_ character: Character = " ", style: Style = .plain, isContinuation: Bool = false) {
        self.character = character
        self.style = style
        self.isContinuation = isContinuation
    }

    public static let blank = Cell()
}
