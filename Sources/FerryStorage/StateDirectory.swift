import FerryModel
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A state directory that cannot be used: names the path and the cause.
public struct StateError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Where the queue lives: `--state-dir`, `$FERRY_STATE_DIR`, `$XDG_STATE_HOME/ferry`, or `~/.local/state/ferry`.
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
        if let failure = Self.makeDirectories(path, mode: 0o700) { throw StateError("state directory: \(failure)") }
        guard access(path, W_OK | X_OK) == 0 else { throw StateError("state directory is not writable: \(path)") }
        // Private to the user whatever made it: the control socket in it takes commands.
        _ = chmod(path, 0o700)
    }

    /// Creates `path` and the directories above it that are missing (new ones with `mode`); nil, or why not, naming
    /// the directory that could not be made and the system's reason (Foundation's words were "The operation
    /// could not be completed").
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) -> String? {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: prefix, isDirectory: &isDirectory) {
                if isDirectory.boolValue { continue }
                return "cannot create directory \(path): \(prefix) is a file"
            }
            if mkdir(prefix, mode) != 0, errno != EEXIST {
                return "cannot create directory \(prefix): \(String(cString: strerror(errno)))"
            }
        }
        return nil
    }

    public func openStore() throws(StateError) -> SQLiteQueueStore {
        try SQLiteQueueStore(path: databasePath)
    }
}
