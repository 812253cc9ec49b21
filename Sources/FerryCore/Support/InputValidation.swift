import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Checks of user input that must hold before anything is queued.
public enum InputValidation {
    /// A line of a list of URLs that is a comment, not a URL: its first non-blank character is `#` (an `-i`
    /// file's line, a line of URLs pasted into the UI).
    public static func isComment(_ line: some StringProtocol) -> Bool {
        line.drop(while: \.isWhitespace).hasPrefix("#")
    }

    /// An absolute http(s), sftp or scp URL with a host, or a message naming what is wrong.
    public static func url(_ text: String) throws(UsageError) -> URL {
        let trimmed = String(Self.trimmed(Substring(text)) { $0.isWhitespace && !$0.isNewline })
        var shown: String { TerminalSafe.sanitize(trimmed) }
        guard !trimmed.isEmpty else { throw UsageError("empty URL") }
        if let suggestion = withoutScheme(trimmed) {
            throw UsageError("no scheme in '\(shown)': write \(TerminalSafe.sanitize(suggestion)) (or https://)")
        }
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased() else {
            throw UsageError("not a valid URL: '\(shown)'")
        }
        guard TransferScheme(url) != nil else {
            throw UsageError("unsupported scheme '\(TerminalSafe.sanitize(scheme))' in '\(shown)': \(TransferScheme.listed)")
        }
        guard let host = url.host, !host.isEmpty else { throw UsageError("no host in URL '\(shown)'") }
        if let port = url.port, !(1...65535).contains(port) {
            throw UsageError("port \(port) in '\(shown)' is not a port (1 to 65535)")
        }
        // A blank inside a URL is no part of it (Foundation would send `%20`): most likely a comment after a URL
        // on a line of a list, which then fetched "3.bin%20" and saved "3.bin ".
        if trimmed.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F }) {
            throw UsageError("a blank in URL '\(shown)': write it as %20 (a comment goes on a line of its own, after #)")
        }
        return url
    }

    /// `example.com/file` or `host:8080/x`, a URL written without its scheme (curl and wget take it as http):
    /// the http URL it most likely meant; nil for anything else.
    static func withoutScheme(_ text: String) -> String? {
        guard !text.contains("://"), let first = text.split(separator: "/", omittingEmptySubsequences: false).first,
              !first.isEmpty else { return nil }
        let parts = first.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2, let host = parts.first, !host.isEmpty,
              host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }),
              host.contains(".") || host == "localhost",
              parts.count == 1 || (!parts[1].isEmpty && parts[1].allSatisfy(\.isASCII) && parts[1].allSatisfy(\.isNumber))
        else { return nil }
        return "http://" + text
    }

    /// `text` without the leading and trailing characters `drop` names. Swift's own: Foundation's
    /// trimmingCharacters goes through NSString on Linux and took a quarter of queueing a long `-i` list.
    private static func trimmed(_ text: Substring, _ drop: (Character) -> Bool) -> Substring {
        guard let first = text.firstIndex(where: { !drop($0) }), let last = text.lastIndex(where: { !drop($0) }) else { return "" }
        return text[first...last]
    }

    /// Bad lines of a `-i` list named one by one in its error, at most; past them, how many more.
    static let badLinesNamed = 20

    /// The URLs of a `-i` list: one per line, blank lines and `#` comments skipped. Every line is checked first,
    /// and every bad one is named with its line number (up to `badLinesNamed`), in one error: a list with three
    /// bad lines is mended in one go, not three.
    /// A long list is read on every core, in runs of lines (a million lines are the first wait of `get -i`),
    /// as bytes: Swift's split and trim by Character (grapheme clusters) were most of that wait.
    public static func urlList(contents: String, path: String) throws(UsageError) -> [URL] {
        let bytes = Array(contents.utf8)
        var found: [Range<Int>] = []
        var start = 0
        for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: "\n") {
            found.append(start..<offset)
            start = offset + 1
        }
        found.append(start..<bytes.count)
        let lines = found
        let runLength = max(20_000, lines.count / max(1, ProcessInfo.processInfo.activeProcessorCount) + 1)
        let runs = stride(from: 0, to: lines.count, by: runLength).map { $0..<min(lines.count, $0 + runLength) }
        let results = Mutex<[Int: (urls: [URL], bad: [String], badCount: Int)]>([:])
        DispatchQueue.concurrentPerform(iterations: runs.count) { run in
            var urls: [URL] = []
            var bad: [String] = []
            var badCount = 0
            for index in runs[run] {
                var line = lines[index]
                while let first = line.first, isASCIISpace(bytes[first]) { line = line.dropFirst() }
                while let last = line.last, isASCIISpace(bytes[last]) { line = line.dropLast() }
                // isComment, on the bytes of an ASCII line.
                if line.isEmpty || bytes[line.lowerBound] == UInt8(ascii: "#") { continue }
                var text = String(decoding: bytes[line], as: UTF8.self)
                if !text.utf8.allSatisfy({ $0 < 0x80 }) {
                    // Other than ASCII: Unicode's blanks count too.
                    text = String(Self.trimmed(Substring(text), \.isWhitespace))
                    if text.isEmpty || isComment(text) { continue }
                }
                do throws(UsageError) {
                    urls.append(try url(text))
                } catch {
                    badCount += 1
                    if bad.count < badLinesNamed { bad.append("\(TerminalSafe.sanitize(path)):\(index + 1): \(error.description)") }
                }
            }
            results.withLock { $0[run] = (urls, bad, badCount) }
        }
        var urls: [URL] = []
        urls.reserveCapacity(lines.count)
        let done = results.withLock { $0 }
        let bad = runs.indices.flatMap { done[$0]?.bad ?? [] }.prefix(badLinesNamed)
        let badCount = runs.indices.reduce(0) { $0 + (done[$1]?.badCount ?? 0) }
        guard badCount == 0 else {
            guard badCount > 1 else { throw UsageError(bad[0]) }
            let more = badCount > bad.count ? "\n  and \(badCount - bad.count) more" : ""
            throw UsageError("\(badCount) bad lines in \(TerminalSafe.sanitize(path)) (nothing was queued):\n  "
                             + bad.joined(separator: "\n  ") + more)
        }
        for run in runs.indices { urls += done[run]?.urls ?? [] }
        return urls
    }

    private static func isASCIISpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// A directory downloads can be written into, made absolute; created when missing.
    public static func writableDirectory(_ path: String, relativeTo cwd: String) throws(UsageError) -> String {
        let absolute = path.hasPrefix("/") ? path : cwd + "/" + path
        let url = URL(fileURLWithPath: absolute).standardizedFileURL
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            if let failure = StateDirectory.makeDirectories(url.path) { throw UsageError(failure) }
            isDirectory = true
        }
        guard isDirectory.boolValue else { throw UsageError("not a directory: \(url.path)") }
        guard access(url.path, W_OK | X_OK) == 0 else { throw UsageError("directory is not writable: \(url.path)") }
        return url.path
    }

    /// A directory whose tree is to be read (`put -r`), made absolute; a missing one or a file is named.
    public static func readableDirectory(_ path: String, relativeTo cwd: String) throws(UsageError) -> String {
        let absolute = URL(fileURLWithPath: path.hasPrefix("/") ? path : cwd + "/" + path).standardizedFileURL.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: absolute, isDirectory: &isDirectory) else {
            throw UsageError("no such directory: \(TerminalSafe.sanitize(absolute))")
        }
        guard isDirectory.boolValue else { throw UsageError("-r uploads a directory's tree; \(TerminalSafe.sanitize(absolute)) is a file") }
        guard access(absolute, R_OK | X_OK) == 0 else { throw UsageError("directory is not readable: \(TerminalSafe.sanitize(absolute))") }
        return absolute
    }

    /// A file's bytes, or a message naming it and the system's reason (a missing file, a directory, no permission).
    public static func contents(of path: String, what: String) throws(UsageError) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw UsageError("cannot read \(what) \(TerminalSafe.sanitize(path)): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var data = Data()
        var info = stat()
        if fstat(fd, &info) == 0, info.st_size > 0 { data.reserveCapacity(Int(info.st_size)) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n < 0, errno == EINTR { continue }
            guard n >= 0 else { throw UsageError("cannot read \(what) \(TerminalSafe.sanitize(path)): \(String(cString: strerror(errno)))") }
            if n == 0 { return data }
            data.append(contentsOf: buffer[0..<n])
        }
    }

    /// Lowercase hex of a SHA-256, or a message.
    public static func sha256(_ text: String) throws(UsageError) -> String {
        let hex = text.lowercased()
        guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else {
            throw UsageError("--sha256 needs 64 hex digits, got '\(TerminalSafe.sanitize(text))'")
        }
        return hex
    }

    public static func header(_ text: String) throws(UsageError) -> HTTPHeader {
        guard let header = HTTPHeader.parse(text) else {
            throw UsageError("bad header '\(TerminalSafe.sanitize(text))': expected 'Name: value'")
        }
        return header
    }

    /// What `ferry put` sends: a file (checked now) or standard input (`-`).
    public static func uploadSource(_ path: String) throws(BodyError) -> UploadSource {
        if path == "-" { return .standardInput }
        _ = try BodyPlan.checkedFileLength(path)
        return .file(path: URL(fileURLWithPath: path).standardizedFileURL.path)
    }

    /// A `-F` argument: `name=value`, or `name=@path[;type=mime]` for a file part (curl's -F syntax,
    /// without its quoting). Errors name the argument.
    public static func formPart(_ text: String) throws -> FormPart {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex else {
            throw UsageError("bad -F '\(TerminalSafe.sanitize(text))': expected name=value or name=@file")
        }
        let name = String(text[..<equals])
        let value = String(text[text.index(after: equals)...])
        guard value.hasPrefix("@") else { return .field(name: name, value: value) }
        var path = String(value.dropFirst())
        var type: String?
        if let semicolon = path.range(of: ";type=", options: .backwards) {
            type = String(path[semicolon.upperBound...])
            path = String(path[..<semicolon.lowerBound])
        }
        guard !path.isEmpty else { throw UsageError("bad -F '\(TerminalSafe.sanitize(text))': no file after '@'") }
        if let type, type.isEmpty || type.contains(where: { $0 == "\r" || $0 == "\n" }) {
            throw UsageError("bad -F '\(TerminalSafe.sanitize(text))': empty or invalid type")
        }
        let source = try uploadSource(path)
        let fileName = path == "-" ? "stdin" : URL(fileURLWithPath: path).lastPathComponent
        return .file(name: name, source: source, fileName: fileName,
                     contentType: type ?? (path == "-" ? MIMETypes.fallback : MIMETypes.type(forFileName: path)))
    }
}
