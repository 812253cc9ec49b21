import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the queue lives: `--state-dir`, `$FERRY_STATE_DIR`, `$XDG_STATE_HOME/ferry`, or `~/.local/state/ferry`.
/// Where the queue lives: `--state-dir`, `$FERRY_STATE_DIR`, `$XDG_STATE_HOME/ferry`, or `~/.local/state/ferry`.
/// A state directory that cannot be used: names the path and the cause.
public struct StateError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public struct StateDirectory: Sendable {
    public let path: String

    public init(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        if let option, !option.isEmpty {
            path = URL(fileURLWithPath: option).standardizedFileURL.path
        } else if let dir = environment["FERRY_STATE_DIR"], !dir.isEmpty {
            path = URL(fileURLWithPath: dir).standardizedFileURL.path
        } else {
            let base = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state"
            path = base + "/ferry"
        }
    }

    public var databasePath: String { path + "/queue.sqlite" }
    var lockPath: String { path + "/engine.lock" }
    /// The running engine's control socket (ControlServer).
    public var socketPath: String { path + "/control.sock" }
    /// Where a background engine writes what it has to say.
    public var logPath: String { path + "/engine.log" }

    /// Creates the directory (private to the user) when missing.
    public func prepare() throws(StateError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw StateError("cannot create state directory \(path): \(error.localizedDescription)")
        }
        guard access(path, W_OK | X_OK) == 0 else { throw StateError("state directory is not writable: \(path)") }
        // Private to the user whatever made it: the control socket in it takes commands.
        _ = chmod(path, 0o700)
    }

    public func openStore() throws(StateError) -> SQLiteQueueStore {
        try SQLiteQueueStore(path: databasePath)
    }
}
