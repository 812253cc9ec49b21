import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import TOMLKit

/// Everything the config file can set. `Config()` is the built-in default, equal to config/ferry.toml.
public struct Config: Sendable, Equatable {
    public enum Mode: String, Sendable, Equatable { case auto, always, never }

    public var concurrency = 4
    public var perHost = 4
    public var downloadDirectory = "."
    public var segments = 1
    public var retryAttempts = 5
    public var baseDelay = 1.0
    public var maxDelay = 60.0
    public var maxRetryAfter = 600.0
    /// How long a failure that costs nothing to wait out is retried past `retryAttempts` (`[retry] patience`).
    public var retryPatience = 60.0
    public var retryUploads = true
    /// A raw file's upload offers the IETF resumable-upload protocol (`[uploads] resumable`).
    public var resumableUploads = true
    /// The chunks of a resumable upload (`[uploads] chunk`: a size, 0 for the rest in one, or "auto").
    public var uploadChunking = UploadChunking.standard
    public var idleTimeout = 30.0
    public var userAgent = "ferry/0.1"
    /// A PEM bundle of trusted CAs used instead of the system's (over `SSL_CERT_FILE`).
    public var caFile: String?
    /// Global bandwidth limits (bytes per second; nil: none) and a timetable for the download limit.
    public var downloadLimit: Int64?
    public var uploadLimit: Int64?
    public var downloadSchedule: LimitSchedule?
    public var refreshHz = 10
    /// Seconds a background engine with nothing to do and no client waits before it exits.
    public var linger = 300.0
    public var ascii = Mode.auto
    public var color = Mode.auto
    /// Ring the terminal's bell when the queue empties.
    public var bell = false
    /// Commands run when an item ends (`[hooks]`).
    public var hooks = HookSettings()
    public var hosts: [HostHeaders] = []
    /// aria2's JSON-RPC front end (`[rpc]`).
    public var rpc = RPCSettings()

    public init() {}

    /// The engine's settings from this config (the command line may override them afterwards).
    public var engine: EngineConfiguration {
        var engine = EngineConfiguration()
        engine.maxConcurrent = concurrency
        // A per-host cap as high as the global one is no cap of its own: it follows -j and the UI's + and -.
        engine.maxPerHost = perHost < concurrency ? perHost : nil
        engine.retry.maxRetries = retryAttempts
        engine.retry.baseDelay = baseDelay
        engine.retry.maxDelay = maxDelay
        engine.retry.maxRetryAfter = maxRetryAfter
        engine.retry.patience = retryPatience
        engine.retryUploads = retryUploads
        engine.offerResumableUploads = resumableUploads
        engine.uploadChunking = uploadChunking
        engine.idleTimeout = idleTimeout
        engine.userAgent = userAgent
        engine.hostHeaders = hosts
        engine.transport.caFile = caFile
        engine.downloadLimit = downloadLimit
        engine.uploadLimit = uploadLimit
        engine.downloadSchedule = downloadSchedule
        return engine
    }

    /// Where the config is looked for: `--config`, then `$FERRY_CONFIG`, then `$XDG_CONFIG_HOME/ferry/config.toml`.
    /// `explicit` is true when the user named the file (then it must exist).
    public static func location(option: String?, environment: [String: String]) -> (path: String, explicit: Bool) {
        if let option { return (option, true) }
        if let path = environment["FERRY_CONFIG"], !path.isEmpty { return (path, true) }
        let base = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        return (base + "/ferry/config.toml", false)
    }

    /// Reads the config file; a missing default file gives the defaults.
    public static func load(option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigError) -> Config {
        let (path, explicit) = location(option: option, environment: environment)
        guard let data = FileManager.default.contents(atPath: path) else {
            if !explicit && !FileManager.default.fileExists(atPath: path) { return Config() }
            throw ConfigError("cannot read config file \(path)")
        }
        return try parse(String(decoding: data, as: UTF8.self), file: path)
    }

    /// Every key the file may hold, by table ("" for the top level): unknown ones are met with the nearest of these.
    static let knownKeys: [String: [String]] = [
        "": ["transfers", "retry", "uploads", "network", "limits", "engine", "hooks", "ui", "hosts", "rpc"],
        "transfers": ["concurrency", "per_host", "download_dir", "segments"],
        "retry": ["attempts", "base_delay", "max_delay", "max_retry_after", "patience", "uploads"],
        "uploads": ["resumable", "chunk"],
        "network": ["idle_timeout", "user_agent", "ca_file"],
        "limits": ["download", "upload", "schedule"],
        "engine": ["linger"],
        "hooks": ["on_done", "on_failed", "timeout"],
        "ui": ["refresh_hz", "ascii", "color", "bell"],
        "hosts": ["match", "headers", "upload_chunk"],
        "rpc": ["enable", "listen", "port", "secret", "allow_origin"],
    ]

    /// Parses config text. Every error names the file, the line and the key.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> Config {
        try ConfigSyntax.precheck(text, file: file)
        let root: TOMLTable
        do {
            root = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw ConfigSyntax.error(error, text: text, file: file)
        } catch {
            throw ConfigError("\(file): \(error)")
        }
        let reader = Reader(text: text, file: file)
        var config = Config()
        for key in root.keys {
            switch key {
            case "transfers":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "concurrency": config.concurrency = try reader.int(table, key, name, min: 1)
                    case "per_host": config.perHost = try reader.int(table, key, name, min: 1)
                    case "download_dir": config.downloadDirectory = try reader.string(table, key, name)
                    case "segments": config.segments = try reader.int(table, key, name, min: 1, max: 64)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "retry":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "attempts": config.retryAttempts = try reader.int(table, key, name, min: 0)
                    case "base_delay": config.baseDelay = try reader.seconds(table, key, name)
                    case "max_delay": config.maxDelay = try reader.seconds(table, key, name)
                    case "max_retry_after": config.maxRetryAfter = try reader.seconds(table, key, name)
                    case "patience": config.retryPatience = try reader.seconds(table, key, name)
                    case "uploads": config.retryUploads = try reader.bool(table, key, name)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "uploads":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "resumable": config.resumableUploads = try reader.bool(table, key, name)
                    case "chunk": config.uploadChunking = try reader.chunking(table, key, name)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "network":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "idle_timeout": config.idleTimeout = try reader.seconds(table, key, name, positive: true)
                    case "user_agent": config.userAgent = try reader.headerValue(table, key, name)
                    case "ca_file":
                        let path = NSString(string: try reader.string(table, key, name)).expandingTildeInPath
                        guard FileManager.default.isReadableFile(atPath: path) else {
                            throw reader.error(key, name, "cannot read \(path)")
                        }
                        config.caFile = path
                    default: throw reader.unknown(key, name)
                    }
                }
            case "limits":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "download": config.downloadLimit = try reader.rate(table, key, name)
                    case "upload": config.uploadLimit = try reader.rate(table, key, name)
                    case "schedule":
                        let text = try reader.string(table, key, name)
                        do throws(UsageError) {
                            config.downloadSchedule = try LimitSchedule.parse(text)
                        } catch {
                            throw reader.error(key, name, error.description)
                        }
                    default: throw reader.unknown(key, name)
                    }
                }
            case "engine":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "linger": config.linger = try reader.seconds(table, key, name)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "hooks":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "on_done": config.hooks.onDone = try reader.command(table, key, name)
                    case "on_failed": config.hooks.onFailed = try reader.command(table, key, name)
                    case "timeout": config.hooks.timeout = try reader.seconds(table, key, name, positive: true)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "ui":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "refresh_hz": config.refreshHz = try reader.int(table, key, name, min: 1, max: 60)
                    case "ascii": config.ascii = try reader.mode(table, key, name)
                    case "color": config.color = try reader.mode(table, key, name)
                    case "bell": config.bell = try reader.bool(table, key, name)
                    default: throw reader.unknown(key, name)
                    }
                }
            case "rpc":
                let table = try reader.table(root, key)
                for name in table.keys {
                    switch name {
                    case "enable": config.rpc.enable = try reader.bool(table, key, name)
                    case "listen": config.rpc.listen = try reader.string(table, key, name)
                    case "port": config.rpc.port = try reader.int(table, key, name, min: 1, max: 65535)
                    case "secret":
                        let secret = try reader.string(table, key, name)
                        guard !secret.isEmpty, !secret.contains(where: { $0.isWhitespace || $0.isNewline }) else {
                            throw reader.error(key, name, "a secret is one word, not empty")
                        }
                        config.rpc.secret = secret
                    case "allow_origin": config.rpc.allowOrigin = try reader.headerValue(table, key, name)
                    default: throw reader.unknown(key, name)
                    }
                }
                if !RPCSettings.isLoopback(config.rpc.listen), config.rpc.secret == nil {
                    throw ConfigError("\(file): [rpc] listen = \"\(TerminalSafe.sanitize(config.rpc.listen))\" reaches other machines: it needs a secret of its own in the config ([rpc] secret)")
                }
            case "hosts":
                guard let array = root[key]?.array else {
                    throw reader.wrongType(nil, key, expected: "an array of [[hosts]] tables")
                }
                for element in array {
                    guard let table = element.table else { throw reader.wrongType(nil, key, expected: "a [[hosts]] table") }
                    config.hosts.append(try reader.hostHeaders(table))
                }
            default:
                throw reader.unknown(nil, key)
            }
        }
        return config
    }
}

/// Reads typed values and names the file, line and key of anything wrong.
private struct Reader {
    let lines: [Substring]
    let file: String

    init(text: String, file: String) {
        self.lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        self.file = file
    }

    /// The line and column where `key` is set inside `[table]` (or its header when table is nil), for messages.
    func position(_ table: String?, _ key: String) -> (line: Int, column: Int)? {
        var current: String?
        for (index, raw) in lines.enumerated() {
            let column = raw.prefix { $0 == " " || $0 == "\t" }.count + 1
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("[") {
                current = ConfigSyntax.tableName(header: line)
                if table == nil && current == key { return (index + 1, column) }
                continue
            }
            guard current == table else { continue }
            if let equals = line.firstIndex(of: "="),
               line[..<equals].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\"'")) == key {
                return (index + 1, column)
            }
        }
        return nil
    }

    func name(_ table: String?, _ key: String) -> String { table.map { "\($0).\(key)" } ?? key }

    func error(_ table: String?, _ key: String, _ message: String) -> ConfigError {
        let at = position(table, key).map { ":\($0.line):\($0.column)" } ?? ""
        return ConfigError("\(file)\(at): \(name(table, key)): \(message)")
    }

    /// An unknown key, with the nearest known one when it is near enough to be a slip ("concurency").
    func unknown(_ table: String?, _ key: String) -> ConfigError {
        let known = Config.knownKeys[table ?? ""] ?? []
        guard let nearest = ConfigSyntax.nearest(to: key, among: known) else { return error(table, key, "unknown key") }
        return error(table, key, "unknown key; did you mean \(nearest)?")
    }

    /// A command line for a hook: a string split into words as a shell would (quotes, backslashes) but run
    /// without one, or an array of words.
    func command(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> [String] {
        let words: [String]
        if let array = table[key]?.array {
            var collected: [String] = []
            for element in array {
                guard let word = element.string else { throw wrongType(section, key, expected: "a command line or an array of strings") }
                collected.append(word)
            }
            words = collected
        } else if let text = table[key]?.string {
            do throws(UsageError) {
                words = try HookSettings.words(text)
            } catch {
                throw self.error(section, key, error.description)
            }
        } else {
            throw wrongType(section, key, expected: "a command line or an array of strings")
        }
        guard let program = words.first, !program.isEmpty else { throw error(section, key, "the command is empty") }
        guard !words.contains(where: { $0.contains("\0") }) else { throw error(section, key, "the command holds a NUL") }
        return words
    }

    func wrongType(_ table: String?, _ key: String, expected: String) -> ConfigError {
        error(table, key, "expected \(expected)")
    }

    func table(_ root: TOMLTable, _ key: String) throws(ConfigError) -> TOMLTable {
        guard let table = root[key]?.table else { throw wrongType(nil, key, expected: "a table ([\(key)])") }
        return table
    }

    func int(_ table: TOMLTable, _ section: String, _ key: String, min: Int, max: Int = Int.max) throws(ConfigError) -> Int {
        guard let value = table[key]?.int else { throw wrongType(section, key, expected: "a whole number") }
        guard value >= min, value <= max else {
            throw error(section, key, max == Int.max ? "must be \(min) or more" : "must be between \(min) and \(max)")
        }
        return value
    }

    func seconds(_ table: TOMLTable, _ section: String, _ key: String, positive: Bool = false) throws(ConfigError) -> Double {
        let value: Double
        if let d = table[key]?.double { value = d } else if let i = table[key]?.int { value = Double(i) } else {
            throw wrongType(section, key, expected: "a number of seconds")
        }
        guard value.isFinite, value >= 0, !(positive && value == 0) else {
            throw error(section, key, positive ? "must be more than 0" : "must be 0 or more")
        }
        return value
    }

    /// A rate as text ("2M", "off") or a whole number of bytes per second; 0 and "off" mean none.
    func rate(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> Int64? {
        if let number = table[key]?.int {
            guard number >= 0 else { throw error(section, key, "must be 0 or more") }
            return number == 0 ? nil : Int64(number)
        }
        guard let text = table[key]?.string else { throw wrongType(section, key, expected: "a rate such as \"2M\" or \"off\"") }
        do throws(UsageError) {
            return try RateText.parse(text)
        } catch {
            throw self.error(section, key, error.description)
        }
    }

    /// A size in bytes: a number, or text with a unit as rates take them (`"6M"`, `"256KiB"`); 0 or "off": none.
    func size(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> Int64 {
        if let number = table[key]?.int {
            guard number >= 0 else { throw error(section, key, "must be 0 or more") }
            return Int64(number)
        }
        guard let text = table[key]?.string else { throw wrongType(section, key, expected: "a size such as \"6M\", 0 or \"auto\"") }
        do throws(UsageError) {
            return try RateText.parse(text) ?? 0
        } catch {
            throw self.error(section, key, "not a size: '\(TerminalSafe.sanitize(text))' (expected e.g. 6M, 256K, 0 for one request, or auto)")
        }
    }

    /// A resumable upload's chunks: a size (exact; 0: the rest in one request) or "auto", the default (UploadChunking).
    func chunking(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> UploadChunking {
        if table[key]?.string == "auto" { return .standard }
        return UploadChunking(size: try size(table, section, key), grows: false)
    }

    func bool(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> Bool {
        guard let value = table[key]?.bool else { throw wrongType(section, key, expected: "true or false") }
        return value
    }

    func string(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> String {
        guard let value = table[key]?.string else { throw wrongType(section, key, expected: "a string") }
        return value
    }

    func headerValue(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> String {
        let value = try string(table, section, key)
        guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw error(section, key, "must not contain line breaks")
        }
        return value
    }

    func mode(_ table: TOMLTable, _ section: String, _ key: String) throws(ConfigError) -> Config.Mode {
        guard let text = table[key]?.string else { throw wrongType(section, key, expected: "\"auto\", \"always\" or \"never\"") }
        guard let mode = Config.Mode(rawValue: text) else {
            throw error(section, key, "expected \"auto\", \"always\" or \"never\", got \"\(TerminalSafe.sanitize(text))\"")
        }
        return mode
    }

    func hostHeaders(_ table: TOMLTable) throws(ConfigError) -> HostHeaders {
        var match: String?
        var headers: [HTTPHeader] = []
        var uploadChunk: UploadChunking?
        for key in table.keys {
            switch key {
            case "match":
                let value = try string(table, "hosts", key)
                guard !value.isEmpty, !value.contains("/"), !value.contains(":") else {
                    throw error("hosts", key, "expected a host name or *.domain")
                }
                match = value
            case "headers":
                guard let values = table[key]?.table else {
                    throw wrongType("hosts", key, expected: "a table of header names and values")
                }
                for name in values.keys.sorted() {
                    // The value is never shown, even in an error message.
                    guard let value = values[name]?.string, let header = HTTPHeader.parse("\(name): \(value)"), header.name == name else {
                        throw error("hosts", "headers", "header \(TerminalSafe.sanitize(name)) needs a valid name and a one-line string value")
                    }
                    headers.append(header)
                }
            case "upload_chunk":
                uploadChunk = try chunking(table, "hosts", key)
            default:
                throw unknown("hosts", key)
            }
        }
        guard let match else { throw error("hosts", "match", "every [[hosts]] block needs a match") }
        return HostHeaders(match: match, headers: headers, uploadChunk: uploadChunk)
    }
}
