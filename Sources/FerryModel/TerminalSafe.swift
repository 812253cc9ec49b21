import Foundation

/// Making text from outside (server headers, URLs, file names, error bodies) safe to draw on a terminal.
public enum TerminalSafe {
    /// Whether a character holds a control that must not reach a terminal: C0 (NUL included), DEL, C1, and the
    /// bidi and format controls (UntrustedText.isControl).
    public static func isControl(_ character: Character) -> Bool {
        character.unicodeScalars.contains(where: UntrustedText.isControl)
    }

    /// Text from outside made safe to draw on a terminal: C0 controls, DEL, C1 controls and bidi/format controls
    /// become U+FFFD; with `allowNewlines`, "\n" is kept (and "\r\n" becomes "\n"); tabs become a space.
    /// A lone "\r" is always replaced (it would let a line overwrite itself).
    public static func sanitize(_ s: String, allowNewlines: Bool = false) -> String {
        // Printable ASCII, the usual case, is left as it is.
        if s.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return s }
        var out = String.UnicodeScalarView()
        var pendingCR = false
        for c in s.unicodeScalars {
            if pendingCR {
                pendingCR = false
                if c == "\n" {
                    out.append("\n")
                    continue
                }
                out.append(UntrustedText.replacement)
            }
            if c == "\t" {
                out.append(" ")
            } else if allowNewlines && c == "\n" {
                out.append("\n")
            } else if allowNewlines && c == "\r" {
                pendingCR = true
            } else if UntrustedText.isControl(c) {
                out.append(UntrustedText.replacement)
            } else {
                out.append(c)
            }
        }
        if pendingCR { out.append(UntrustedText.replacement) }
        return String(out)
    }

    /// An untrusted body (a server's error page) as one short line: tags and comments stripped, the common
    /// entities decoded, every run of blanks and line ends one space, made safe, cut at a word near `limit`
    /// characters. An HTML 405 page's CRLFs became pairs of U+FFFD and the page was shown whole.
    public static func excerpt<B: Collection>(of bytes: B, limit: Int = 100) -> String where B.Element == UInt8 {
        var text = String(decoding: Array(bytes.prefix(8192)), as: UTF8.self)
        // Tags: what lies between < and > (scripts and styles with their contents, as a browser would not show them).
        for block in ["script", "style"] {
            while let open = text.range(of: "<\(block)", options: .caseInsensitive),
                  let close = text.range(of: "</\(block)>", options: .caseInsensitive, range: open.upperBound..<text.endIndex) {
                text.replaceSubrange(open.lowerBound..<close.upperBound, with: " ")
            }
        }
        var stripped = ""
        var inTag = false
        for character in text {
            if character == "<" { inTag = true; continue }
            if character == ">", inTag { inTag = false; stripped.append(" "); continue }
            if !inTag { stripped.append(character) }
        }
        for (entity, character) in [("&nbsp;", " "), ("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&amp;", "&")] {
            stripped = stripped.replacingOccurrences(of: entity, with: character)
        }
        let words = stripped.split(whereSeparator: { $0.isWhitespace || $0.unicodeScalars.allSatisfy(UntrustedText.isControl) })
        var out = ""
        for word in words {
            if out.count + 1 + word.count > limit {
                if out.isEmpty { out = String(word.prefix(limit - 1)) }
                out += "…"
                break
            }
            out += out.isEmpty ? String(word) : " " + word
        }
        return sanitize(out)
    }

    /// Untrusted bytes: lossy UTF-8 decode (invalid sequences -> U+FFFD), then sanitize.
    public static func sanitize<B: Sequence>(bytes: B, allowNewlines: Bool = false) -> String where B.Element == UInt8 {
        sanitize(String(decoding: Array(bytes), as: UTF8.self), allowNewlines: allowNewlines)
    }

    /// A URL for display with any user:password removed ("http://u:p@h/x" -> "http://h/x"), then sanitized.
    /// The URL stays percent-encoded (it is not decoded for display).
    public static func redactedURL(_ url: URL) -> String {
        sanitize(removingUserInfo(url.absoluteString))
    }

    /// Removes the userinfo part ("user:password@") of the authority of a URL string, if any.
    public static func removingUserInfo(_ s: String) -> String {
        // No "@": no userinfo (the usual case, and a search here costs more than the check).
        guard s.utf8.contains(UInt8(ascii: "@")) else { return s }
        guard let schemeEnd = s.range(of: "://") else { return s }
        let scheme = s[..<schemeEnd.lowerBound]
        // Only a real scheme (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )) introduces an authority.
        func isAlpha(_ c: Unicode.Scalar) -> Bool { ("a"..."z").contains(c) || ("A"..."Z").contains(c) }
        guard let first = scheme.unicodeScalars.first, isAlpha(first),
              scheme.unicodeScalars.allSatisfy({ isAlpha($0) || ("0"..."9").contains($0) || $0 == "+" || $0 == "-" || $0 == "." })
        else { return s }
        let authorityStart = schemeEnd.upperBound
        let rest = s[authorityStart...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? s.endIndex
        let authority = s[authorityStart..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return s }
        return String(s[..<authorityStart]) + String(s[s.index(after: at)...])
    }
}

/// The set of scalars that must never reach a terminal or a file name.
enum UntrustedText {
    static let replacement: Unicode.Scalar = "\u{FFFD}"

    /// C0 controls (incl. NUL), DEL, C1 controls, and the bidi/format controls
    /// U+061C, U+200E, U+200F, U+202A-202E, U+2066-2069.
    static func isControl(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x00...0x1F, 0x7F, 0x80...0x9F,
             0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069:
            return true
        default:
            return false
        }
    }
}
