/// The errors FerryCore reports to the user, one type per source of trouble. Each names the problem in
/// words; the executable maps them to exit statuses and messages (Sources/ferry/Ferry.swift).

/// A problem with what the user typed or gave: reported with exit status 2 before anything is transferred.
public struct UsageError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A config file that cannot be used: names the file, the line or key, and what is wrong.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// An upload body that cannot be made (a missing or unreadable file, standard input in a form).
public struct BodyError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// What kind of failure it is for an item that cannot send it.
    public let kind: FailureKind
    public init(_ description: String, kind: FailureKind = .unreadableFile) {
        self.description = description
        self.kind = kind
    }
}



/// The control socket failed a client: the engine went away, refused a request, or did not answer.
public struct ControlError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The engine answered and said no (an unknown id, a full disk), as opposed to a connection that failed.
    public let refused: Bool
    public init(_ description: String, refused: Bool = false) {
        self.description = description
        self.refused = refused
    }
}
