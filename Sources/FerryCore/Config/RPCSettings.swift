import Foundation

/// aria2's JSON-RPC front end (`[rpc]`): off by default. When on, the engine listens on `listen:port` for
/// `POST /jsonrpc`; every call must carry the secret (`token:SECRET`), which is the config's, or one made on
/// first use and kept 0600 in the state directory (`ferry rpc` shows it).
public struct RPCSettings: Sendable, Equatable {
    public var enable = false
    public var listen = "127.0.0.1"
    public var port = 6800
    /// The config's secret (nil: the state directory's, made on first use).
    public var secret: String?
    /// Sent as `Access-Control-Allow-Origin` (nil: no CORS headers, so that a web page cannot read answers).
    public var allowOrigin: String?

    public init() {}

    /// Addresses that only this machine reaches.
    public static func isLoopback(_ address: String) -> Bool {
        address == "localhost" || address == "::1" || address.hasPrefix("127.")
    }

    /// `bytes` random bytes (the system's generator) in hex.
    public static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The secret in force: the config's, or the state directory's (`rpc-secret`, made 0600 if missing).
    public func secret(stateDirectory: String) throws(ConfigError) -> String {
        if let secret { return secret }
        let path = stateDirectory + "/rpc-secret"
        if let data = FileManager.default.contents(atPath: path) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !text.isEmpty { return text }
        }
        let made = Self.randomHex(bytes: 16)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw ConfigError("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        _ = fchmod(fd, 0o600)
        let line = made + "\n"
        guard line.utf8.count == line.withCString({ write(fd, $0, strlen($0)) }) else {
            throw ConfigError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        return made
    }
}

/// What the engine that last started in a state directory did about the RPC, kept in the directory
/// (`rpc-listener`) for `ferry rpc` to tell the truth: it listened, it could not (the port was taken: another
/// engine, of another state directory, answers there with another secret), or its RPC was off.
public struct RPCListener: Sendable, Codable, Equatable {
    public var pid: Int32
    /// The address it answers at; nil when it does not.
    public var url: String?
    /// Why it could not listen (nil: it did, or the RPC was off).
    public var failure: String?

    public init(pid: Int32, url: String?, failure: String?) {
        self.pid = pid
        self.url = url
        self.failure = failure
    }

    public static func path(stateDirectory: String) -> String { stateDirectory + "/rpc-listener" }

    /// Written by the engine when it starts (a file of its own, replaced whole).
    public func write(stateDirectory: String) {
        let path = Self.path(stateDirectory: stateDirectory)
        guard let data = try? JSONEncoder().encode(self) else { return }
        try? data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    public static func read(stateDirectory: String) -> RPCListener? {
        FileManager.default.contents(atPath: path(stateDirectory: stateDirectory)).flatMap { try? JSONDecoder().decode(RPCListener.self, from: $0) }
    }
}

extension Config {
    /// Where an add with no folder of its own goes when no shell's folder applies (aria2's `addUri` without
    /// `dir`): `[transfers] download_dir` when the config names one (a relative one under the home directory),
    /// else the user's download folder (`$XDG_DOWNLOAD_DIR`, else `~/Downloads`, when it exists), else the
    /// home directory. Never the engine's working directory: that is whatever folder the shell that happened
    /// to start the engine stood in.
    public func unattendedDownloadDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        func absolute(_ path: String) -> String {
            let expanded = path == "~" ? home : path.hasPrefix("~/") ? home + path.dropFirst(1) : path
            let full = expanded.hasPrefix("/") ? expanded : home + "/" + expanded
            return URL(fileURLWithPath: full).standardizedFileURL.path
        }
        if downloadDirectory != Config().downloadDirectory { return absolute(downloadDirectory) }
        var isDirectory: ObjCBool = false
        for candidate in [environment["XDG_DOWNLOAD_DIR"], "~/Downloads"].compactMap({ $0 }) where !candidate.isEmpty {
            let path = absolute(candidate)
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue { return path }
        }
        return absolute(home)
    }
}
