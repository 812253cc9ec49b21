import FerryModel
import FerryStorage
import FerryTransport

/// How many transfers run at once, the one rule every front end goes through (the command line's -j, the
/// config, the UI's + and -): a global cap, and a per-host cap that is a restriction of its own only when
/// the config sets it lower than the global one; otherwise it follows the global cap wherever it moves.
public struct ConcurrencyCaps: Sendable, Equatable {
    /// The session lets at most 256 connections per host exist; the caps stay inside that.
    public static let range = 1...256

    public private(set) var global: Int
    /// The per-host cap of its own, nil when it follows the global cap.
    public private(set) var perHostCap: Int?

    public init(global: Int, perHost: Int? = nil) {
        self.global = Self.clamped(global)
        self.perHostCap = perHost.map(Self.clamped).flatMap { $0 < self.global ? $0 : nil }
    }

    /// Transfers at once against one host (over HTTP/1.1: connections).
    public var perHost: Int { min(perHostCap ?? global, global) }

    /// A host that answers over HTTP/2 takes one connection, and this many of its items run at once on it
    /// as streams: 16, or the global cap when it is higher (so `-j 64` means 64 at once there too).
    public var streams: Int { max(Self.minimumStreams, global) }
    public static let minimumStreams = 16

    /// The global cap set to `n` (kept in range); a per-host cap of its own stays.
    public func with(global n: Int) -> ConcurrencyCaps {
        var caps = self
        caps.global = Self.clamped(n)
        return caps
    }

    /// One more or one fewer at once (`+`/`-`): never a move the other way, never out of range.
    public func stepped(by delta: Int) -> ConcurrencyCaps {
        with(global: global + delta)
    }

    private static func clamped(_ n: Int) -> Int { min(range.upperBound, max(range.lowerBound, n)) }
}
