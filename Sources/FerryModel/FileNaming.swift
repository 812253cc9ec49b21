import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Choosing a local file name from untrusted sources (Content-Disposition, URL) without ever escaping the target directory.
public enum FileNaming {
    /// NAME_MAX on Linux file systems (255 bytes) less the `.part` a download's file carries until it is done
    /// (PartialFile.suffix; FileNamingTests pins the sum): a name of 251-255 bytes made a `.part` name the file
    /// system refused ("File name too long"), and the download failed instead of saving under a shorter name.
    public static let maxNameBytes = 250
    /// Longest suffix (dot included) still treated as an extension; anything longer is part of the stem.
    static let maxExtensionBytes = 20
    /// Second-level extensions kept together with ".tar".
    static let compressedTarExtensions: Set<String> = [".gz", ".bz2", ".xz", ".zst"]

    // MARK: Content-Disposition

    /// The file name carried by a Content-Disposition header value, or nil.
    /// `filename*` (RFC 8187 / 5987: charset'lang'percent-encoded, UTF-8 and ISO-8859-1 at least, case-insensitive param names)
    /// wins over `filename`; `filename` may be a quoted-string (with backslash escapes) or a token.
    /// Tolerates junk: unbalanced quotes, extra semicolons, white space, missing disposition type.
    /// Returns the raw decoded name (NOT yet made safe).
    public static func filename(fromContentDisposition value: String) -> String? {
        var plain: String?
        var extended: String?
        for (name, val) in parameters(value) {
            switch name {
            case "filename*":
                if extended == nil, let decoded = decodeExtValue(val), !decoded.isEmpty { extended = decoded }
            case "filename":
                if plain == nil, !val.isEmpty { plain = val }
            default:
                break
            }
        }
        return extended ?? plain
    }

    /// Splits a header value into (lower-cased name, unquoted value) parameters. Segments without "=" are skipped.
    static func parameters(_ value: String) -> [(String, String)] {
        let s = Array(value.unicodeScalars)
        var result: [(String, String)] = []
        var i = 0
        func isWS(_ c: Unicode.Scalar) -> Bool { c == " " || c == "\t" || c == "\r" || c == "\n" }
        while i < s.count {
            while i < s.count, isWS(s[i]) || s[i] == ";" { i += 1 }
            guard i < s.count else { break }
            var name = String.UnicodeScalarView()
            while i < s.count, s[i] != "=", s[i] != ";" {
                name.append(s[i])
                i += 1
            }
            guard i < s.count, s[i] == "=" else { continue }  // e.g. the disposition type
            i += 1
            while i < s.count, isWS(s[i]) { i += 1 }
            var val = String.UnicodeScalarView()
            if i < s.count, s[i] == "\"" {
                i += 1
                while i < s.count {
                    let c = s[i]
                    if c == "\\", i + 1 < s.count {
                        val.append(s[i + 1])
                        i += 2
                        continue
                    }
                    i += 1
                    if c == "\"" { break }
                    val.append(c)
                }
                while i < s.count, s[i] != ";" { i += 1 }  // junk after the closing quote
            } else {
                while i < s.count, s[i] != ";" {
                    val.append(s[i])
                    i += 1
                }
                while let last = val.last, isWS(last) { val.removeLast() }
            }
            // "attachment filename=x" (missing ";"): the parameter name is the last word.
            let key = String(name).split(whereSeparator: { $0.isWhitespace }).last.map { $0.lowercased() } ?? ""
            result.append((key, String(val)))
        }
        return result
    }

    /// Decodes an RFC 8187 ext-value (charset'language'pct-encoded). nil when malformed or not decodable.
    static func decodeExtValue(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
        let bytes = percentDecodedBytes(parts[2])
        switch charset {
        case "iso-8859-1", "iso8859-1", "iso_8859-1", "latin1", "latin-1", "l1", "us-ascii":
            var scalars = String.UnicodeScalarView()
            for b in bytes { scalars.append(Unicode.Scalar(b)) }
            return String(scalars)
        default:
            // "utf-8" and, leniently, any other label: accept only valid UTF-8.
            return String(validating: bytes, as: UTF8.self)
        }
    }

    /// Percent-decodes strictly, as Foundation's `removingPercentEncoding` does: nil for a "%" not followed by two
    /// hex digits or bytes that are not UTF-8. Without Foundation's way through CFString (a tree's walk spent a
    /// seventh of its time there, decoding each link's path); text without a "%" is taken as it is.
    public static func percentDecoded(_ s: Substring) -> String? {
        guard s.utf8.contains(UInt8(ascii: "%")) else { return String(s) }
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var bytes = s.utf8.makeIterator()
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "%") else {
                out.append(byte)
                continue
            }
            guard let high = bytes.next().flatMap(hexValue), let low = bytes.next().flatMap(hexValue) else { return nil }
            out.append(high << 4 | low)
        }
        return String(validating: out, as: UTF8.self)
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Percent-decodes leniently: a "%" not followed by two hex digits is kept literally.
    static func percentDecodedBytes(_ s: Substring) -> [UInt8] {
        let u = Array(s.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "%"), i + 2 < u.count, let h = hexValue(u[i + 1]), let l = hexValue(u[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(u[i])
                i += 1
            }
        }
        return out
    }

    // MARK: URL

    /// The last non-empty path segment of the URL, percent-decoded; nil when there is none (e.g. "http://h/" or "http://h").
    /// A segment that does not decode to valid UTF-8 is returned still encoded.
    public static func filename(fromURL url: URL) -> String? {
        // The path as sent (percent-encoded), not through URLComponents (a thousand small downloads spent 1.5 %
        // of their CPU making one each).
        let path = url.absoluteURL.path(percentEncoded: true)
        guard let segment = path.split(separator: "/").last else { return nil }
        let decoded = percentDecoded(segment) ?? String(segment)
        return decoded.isEmpty ? nil : decoded
    }

    // MARK: Making names safe

    /// Reduce an untrusted name to a safe base name, or nil if nothing usable is left:
    /// takes only what follows the last "/" or "\\"; replaces NUL, C0 controls, DEL, C1 controls and bidi/format controls
    /// (U+061C, U+200E, U+200F, U+202A-202E, U+2066-2069) with "_"; strips leading dots, dashes and white space
    /// and trailing dots and white space; "." and ".." and "" give nil; limits to 250 UTF-8 bytes (maxNameBytes)
    /// (truncates the stem, keeps the extension, never splits a character).
    public static func safeBaseName(_ raw: String) -> String? {
        var scalars = Substring(raw).unicodeScalars
        if let sep = scalars.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
            scalars = scalars[scalars.index(after: sep)...]
        }
        var cleaned = String.UnicodeScalarView()
        for c in scalars { cleaned.append(UntrustedText.isControl(c) ? "_" : c) }
        var name = trimmed(String(cleaned))
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        if name.utf8.count > maxNameBytes {
            let (stem, ext) = splitExtension(name)
            let kept = truncated(stem, maxBytes: maxNameBytes - ext.utf8.count)
            name = trimmed(kept + ext)
            guard !name.isEmpty else { return nil }
        }
        return name
    }

    /// Strips leading dots, dashes and white space, and trailing dots and white space.
    static func trimmed(_ s: String) -> String {
        let u = s.unicodeScalars
        guard let start = u.firstIndex(where: { !($0 == "." || $0 == "-" || $0.properties.isWhitespace) }) else { return "" }
        let end = u.lastIndex(where: { !($0 == "." || $0.properties.isWhitespace) })!
        return String(u[start...end])
    }

    /// The longest prefix of `s` of at most `maxBytes` UTF-8 bytes made of whole characters
    /// (whole scalars only when not even the first character fits).
    static func truncated<S: StringProtocol>(_ s: S, maxBytes: Int) -> String {
        guard maxBytes > 0 else { return "" }
        if s.utf8.count <= maxBytes { return String(s) }
        var out = ""
        var used = 0
        for ch in s {
            let n = ch.utf8.count
            if used + n > maxBytes { break }
            out.append(ch)
            used += n
        }
        if out.isEmpty {
            var scalars = String.UnicodeScalarView()
            for c in s.unicodeScalars {
                let n = c.utf8.count
                if used + n > maxBytes { break }
                scalars.append(c)
                used += n
            }
            out = String(scalars)
        }
        return out
    }

    /// Splits "name.ext" into ("name", ".ext"), keeping ".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst" together.
    /// No extension when there is no dot after the first character, or the suffix is longer than 20 bytes or has white space.
    static func splitExtension(_ name: String) -> (stem: Substring, ext: Substring) {
        guard let dot = name.lastIndex(of: "."), dot > name.startIndex else { return (name[...], "") }
        let ext = name[dot...]
        guard ext.utf8.count >= 2, ext.utf8.count <= maxExtensionBytes, !ext.contains(where: { $0.isWhitespace }) else {
            return (name[...], "")
        }
        let stem = name[..<dot]
        if compressedTarExtensions.contains(ext.lowercased()),
           let dot2 = stem.lastIndex(of: "."), dot2 > name.startIndex,
           stem[dot2...].lowercased() == ".tar" {
            return (name[..<dot2], name[dot2...])
        }
        return (stem, ext)
    }

    // MARK: Choosing

    /// The name to save under: the first of explicit, Content-Disposition (decoded), URL last segment that survives
    /// safeBaseName; else "index.html".
    public static func chooseName(explicit: String?, contentDisposition: String?, url: URL) -> String {
        if let explicit, let name = safeBaseName(explicit) { return name }
        if let contentDisposition, let raw = filename(fromContentDisposition: contentDisposition),
           let name = safeBaseName(raw) {
            return name
        }
        if let raw = filename(fromURL: url), let name = safeBaseName(raw) { return name }
        return "index.html"
    }

    /// The n-th alternative when a name is taken: numbered("a.bin", 1) == "a (1).bin", numbered("README", 2) == "README (2)",
    /// numbered("x.tar.gz", 1) == "x (1).tar.gz". The result is at most maxNameBytes (the stem is shortened).
    /// n <= 0 returns the name unchanged.
    public static func numbered(_ name: String, _ n: Int) -> String {
        guard n > 0 else { return name }
        let (stem, ext) = splitExtension(name)
        let suffix = " (\(n))"
        let budget = maxNameBytes - suffix.utf8.count - ext.utf8.count
        let kept = truncated(stem, maxBytes: budget)
        return kept.isEmpty ? "(\(n))" + ext : kept + suffix + ext
    }

    // MARK: Safety net

    /// True when directory + "/" + name, with the directory's symlinks resolved (realpath), is a path directly inside that
    /// directory and name has no path separator. Also false when the directory does not exist or is not a directory, when
    /// the name is not a plausible file name ("", ".", "..", NUL, "/" or "\\", more than maxNameBytes), or when an entry of
    /// that name already exists and is a symbolic link (writing through it could land anywhere).
    public static func resolvesInside(directory: String, name: String) -> Bool {
        guard let dir = resolvedDirectory(directory) else { return false }
        return entry(resolvedDirectory: dir, name: name) != .refused
    }

    /// The directory with its symlinks resolved, when it exists and is a directory.
    public static func resolvedDirectory(_ directory: String) -> String? {
        guard !directory.isEmpty, !directory.unicodeScalars.contains("\0"), let dir = realPath(directory), isDirectory(dir)
        else { return nil }
        return dir
    }

    /// What a name is in a directory already resolved (`resolvedDirectory`): refused where `resolvesInside` is
    /// false, else free or taken by an entry that exists. What a claim checks for each name, with one lstat.
    public enum Entry: Sendable { case refused, free, taken }

    public static func entry(resolvedDirectory dir: String, name: String) -> Entry {
        guard !name.isEmpty, name != ".", name != "..", name.utf8.count <= maxNameBytes,
              !name.unicodeScalars.contains(where: { $0 == "/" || $0 == "\\" || $0 == "\0" })
        else { return .refused }
        let candidate = dir == "/" ? "/" + name : dir + "/" + name
        // Belt and braces: the candidate's parent must be exactly the resolved directory.
        guard let slash = candidate.lastIndex(of: "/") else { return .refused }
        let parent = slash == candidate.startIndex ? "/" : String(candidate[..<slash])
        guard parent == dir, String(candidate[candidate.index(after: slash)...]) == name else { return .refused }
        var st = stat()
        guard lstat(candidate, &st) == 0 else { return .free }
        return (st.st_mode & S_IFMT) == S_IFLNK ? .refused : .taken
    }

    static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }
}
