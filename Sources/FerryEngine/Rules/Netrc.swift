import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A `.netrc` file, as curl and wget read it: `machine HOST login NAME password SECRET`, a `default` entry
/// for any other host, `account` (ignored) and `macdef` blocks (skipped to the next blank line); tokens are
/// separated by white space and may be quoted ("a b", with \" and \\ inside). Secrets are never printed.
public struct Netrc: Sendable, Equatable {
    public struct Login: Sendable, Equatable {
        public var login: String
        public var password: String
    }

    /// Entries by lowercased host, the first one for a host winning (as in curl).
    public private(set) var machines: [String: Login] = [:]
    public private(set) var fallback: Login?

    public init() {}

    /// The login for `host`: its `machine` entry, else (when `orDefault`) the `default` entry.
    public func login(for host: String, orDefault: Bool) -> Login? {
        machines[host.lowercased()] ?? (orDefault ? fallback : nil)
    }

    /// Parses the text; an error names the file and line but never a secret. Words it does not know (`port`,
    /// a program's own keywords) are skipped with their value, as wget does.
    public static func parse(_ text: String, file: String) throws(UsageError) -> Netrc {
        var netrc = Netrc()
        let tokens = try tokenize(withoutMacros(text), file: file)
        var index = 0
        // The entry being read: its host (nil for `default`) and what it has so far.
        var current: (host: String?, isDefault: Bool, login: String?, password: String?)?

        func close() {
            guard let entry = current else { return }
            current = nil
            let login = Login(login: entry.login ?? "", password: entry.password ?? "")
            guard entry.login != nil || entry.password != nil else { return }
            if entry.isDefault {
                if netrc.fallback == nil { netrc.fallback = login }
            } else if let host = entry.host, netrc.machines[host] == nil {
                netrc.machines[host] = login
            }
        }

        func value(after token: Token) throws(UsageError) -> String {
            index += 1
            guard index < tokens.count else {
                throw UsageError("\(file):\(token.line): '\(TerminalSafe.sanitize(String(token.text.prefix(40))))' needs a value after it")
            }
            return tokens[index].text
        }

        while index < tokens.count {
            let token = tokens[index]
            switch token.text.lowercased() {
            case "machine":
                close()
                current = (try value(after: token).lowercased(), false, nil, nil)
            case "default":
                close()
                current = (nil, true, nil, nil)
            case "login":
                let login = try value(after: token)
                guard current != nil else { throw UsageError("\(file):\(token.line): 'login' outside a machine entry") }
                current?.login = login
            case "password":
                let password = try value(after: token)
                guard current != nil else { throw UsageError("\(file):\(token.line): 'password' outside a machine entry") }
                current?.password = password
            default:
                // account, port, or a word of another program's: skipped with its value.
                _ = try value(after: token)
            }
            index += 1
        }
        close()
        return netrc
    }

    /// The text without its `macdef` blocks: a macro runs from its `macdef NAME` to the next empty line, and
    /// its lines are commands for ftp, never tokens (quotes in them do not open words).
    static func withoutMacros(_ text: String) -> String {
        var kept: [Substring] = []
        var inMacro = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if inMacro {
                if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { inMacro = false }
                kept.append("")  // line numbers stay true
                continue
            }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if let at = words.firstIndex(where: { $0.lowercased() == "macdef" }), !line.trimmingCharacters(in: .whitespaces).hasPrefix("#") {
                kept.append(Substring(words[..<at].joined(separator: " ")))
                inMacro = true
            } else {
                kept.append(line)
            }
        }
        return kept.joined(separator: "\n")
    }

    struct Token {
        var text: String
        var line: Int
    }

    static func tokenize(_ text: String, file: String) throws(UsageError) -> [Token] {
        var tokens: [Token] = []
        var line = 1
        var scalars = Array(text.unicodeScalars)[...]
        var lineHasToken = false
        while let c = scalars.first {
            if c == "\n" {
                line += 1
                lineHasToken = false
                scalars.removeFirst()
                continue
            }
            if c == " " || c == "\t" || c == "\r" || c == "\u{0C}" {
                scalars.removeFirst()
                continue
            }
            if c == "#", !lineHasToken {
                // A comment line (curl: '#' starting a line).
                while let next = scalars.first, next != "\n" { scalars.removeFirst() }
                continue
            }
            var word = String.UnicodeScalarView()
            let startLine = line
            if c == "\"" {
                scalars.removeFirst()
                var closed = false
                while let next = scalars.popFirst() {
                    if next == "\"" { closed = true; break }
                    // A quoted word ends with its line (curl's rule): a lone quote cannot swallow later entries.
                    if next == "\n" { break }
                    if next == "\\", let escaped = scalars.popFirst() {
                        switch escaped {
                        case "n": word.append("\n")
                        case "r": word.append("\r")
                        case "t": word.append("\t")
                        default: word.append(escaped)
                        }
                        continue
                    }
                    word.append(next)
                }
                guard closed else { throw UsageError("\(file):\(startLine): a quoted word is not closed") }
            } else {
                while let next = scalars.first, !(next == " " || next == "\t" || next == "\n" || next == "\r") {
                    word.append(next)
                    scalars.removeFirst()
                }
            }
            tokens.append(Token(text: String(word), line: startLine))
            lineHasToken = true
        }
        return tokens
    }

    /// The file a command uses when not told: `$NETRC`, else `~/.netrc` when it exists; nil for none.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let path = environment["NETRC"], !path.isEmpty { return path }
        let home = environment["HOME"] ?? NSHomeDirectory()
        let path = home + "/.netrc"
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// Reads and checks `path` for a command about to queue items that use it: an unreadable or malformed
    /// file is an error naming it; one that others may read gives a warning (returned), as curl gives.
    public static func check(path: String) throws(UsageError) -> (netrc: Netrc, warning: String?) {
        var kind = stat()
        if stat(path, &kind) == 0, kind.st_mode & S_IFMT != S_IFREG {
            // The engine reads it again at each attempt: a pipe or a device would be gone or empty by then.
            throw UsageError("netrc file \(path) is not a regular file")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw UsageError("cannot read netrc file \(path)") }
        let netrc = try parse(String(decoding: data, as: UTF8.self), file: path)
        var info = stat()
        var warning: String?
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 {
            warning = "\(path) can be read by other users; its passwords are not private (chmod 600 \(path))"
        }
        return (netrc, warning)
    }
}

/// The engine's netrc files, read when a request needs one and read again when the file changes, so an edit
/// applies to the next attempt. A file that cannot be read or parsed gives no credentials (the client that
/// queued the item checked it then).
final class NetrcFiles: Sendable {
    private struct Entry {
        var modified: timespec
        var size: Int64
        var netrc: Netrc
    }
    private let cache = Mutex<[String: Entry]>([:])

    func netrc(at path: String) -> Netrc? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if let entry = cache.withLock({ $0[path] }), entry.modified.tv_sec == info.st_mtim.tv_sec,
           entry.modified.tv_nsec == info.st_mtim.tv_nsec, entry.size == Int64(info.st_size) {
            return entry.netrc
        }
        guard let data = FileManager.default.contents(atPath: path),
              let netrc = try? Netrc.parse(String(decoding: data, as: UTF8.self), file: path) else { return nil }
        cache.withLock { $0[path] = Entry(modified: info.st_mtim, size: Int64(info.st_size), netrc: netrc) }
        return netrc
    }
}
