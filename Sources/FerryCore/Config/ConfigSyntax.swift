import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
import TOMLKit

/// Config messages in words: a TOML syntax error becomes "file:line:column: `the line`: what was expected",
/// and an unknown key is met with the nearest known one.
enum ConfigSyntax {
    /// What TOMLKit's parser (toml++ 3.x) must not be given: a place where a key must start (a table header's
    /// name, a key after a '.', a key in an inline table) holding neither a bare-key character nor a quote
    /// breaks a precondition of its key parser, an assertion that aborts the process (toml++ #301; fuzzing
    /// found `[[[1]]]`, `[`+a combining accent, `[` at the end of a line, `{ =`, `[ }`). Such text is refused here,
    /// in words, before toml++ sees it. A small scanner: strings and comments are skipped, keys are checked.
    static func precheck(_ text: String, file: String) throws(ConfigError) {
        let scalars = Array(text.unicodeScalars)
        var i = 0
        var line = 1
        var lineStart = 0
        var braces: [UnicodeScalar] = []  // open '{' and '[' of values
        var atLineStart = true

        func fail(_ what: String) -> ConfigError {
            var end = lineStart
            while end < scalars.count, scalars[end] != "\n" { end += 1 }
            var shown = String.UnicodeScalarView()
            shown.append(contentsOf: scalars[lineStart..<end])
            let line = TerminalSafe.sanitize(String(String(shown).trimmingCharacters(in: .whitespaces).prefix(80)))
            return ConfigError("\(file):\(lineNumber):\(i - lineStart + 1): `\(line)`: \(what)")
        }
        var lineNumber: Int { line }
        func isBlank(_ c: UnicodeScalar) -> Bool { c == " " || c == "\t" }
        func startsKey(_ c: UnicodeScalar) -> Bool {
            (c.isASCII && (CharacterSet.alphanumerics.contains(c) || c == "_" || c == "-")) || c == "\"" || c == "'"
        }
        func skipBlanks() { while i < scalars.count, isBlank(scalars[i]) { i += 1 } }
        /// A key (dotted, bare or quoted) must start here.
        func key(_ what: String) throws(ConfigError) {
            while true {
                skipBlanks()
                guard i < scalars.count, startsKey(scalars[i]) else { throw fail(what) }
                if scalars[i] == "\"" || scalars[i] == "'" {
                    try string()
                } else {
                    while i < scalars.count, scalars[i].isASCII, CharacterSet.alphanumerics.contains(scalars[i]) || scalars[i] == "_" || scalars[i] == "-" { i += 1 }
                }
                skipBlanks()
                guard i < scalars.count, scalars[i] == "." else { return }
                i += 1
            }
        }
        /// A string starting at i ('...', "...", and their triple forms); i ends after it.
        func string() throws(ConfigError) {
            let quote = scalars[i]
            let triple = i + 2 < scalars.count && scalars[i + 1] == quote && scalars[i + 2] == quote
            i += triple ? 3 : 1
            while i < scalars.count {
                let c = scalars[i]
                if c == "\\" && quote == "\"" { i += 2; continue }
                if c == "\n" {
                    guard triple else { return }  // toml++ says an unclosed string in words
                    line += 1
                    lineStart = i + 1
                }
                if c == quote {
                    if !triple { i += 1; return }
                    if i + 2 < scalars.count, scalars[i + 1] == quote, scalars[i + 2] == quote { i += 3; return }
                }
                i += 1
            }
        }

        while i < scalars.count {
            let c = scalars[i]
            if c == "\n" {
                line += 1
                i += 1
                lineStart = i
                atLineStart = braces.isEmpty || braces.last == "["
                continue
            }
            if isBlank(c) || c == "\r" { i += 1; continue }
            if c == "#" {
                while i < scalars.count, scalars[i] != "\n" { i += 1 }
                continue
            }
            if atLineStart && braces.isEmpty {
                atLineStart = false
                if c == "[" {
                    i += 1
                    if i < scalars.count, scalars[i] == "[" { i += 1 }
                    try key("expected a table name after '['")
                    continue
                }
                if startsKey(c) {
                    try key("expected a key")
                    continue
                }
                continue  // toml++ words what else a line may start with
            }
            atLineStart = false
            switch c {
            case "\"", "'":
                try string()
                continue
            case "{":
                braces.append("{")
                i += 1
                skipBlanks()
                if i < scalars.count, scalars[i] == "}" { continue }
                try key("expected a key in the inline table after '{'")
                continue
            case ",":
                i += 1
                if braces.last == "{" { try key("expected a key in the inline table after ','") }
                continue
            case "[":
                braces.append("[")
            case "]", "}":
                // A '}' inside an array reaches toml++'s value parser as a value: an assertion that aborts
                // (fuzzing found `a = [ } ]`). Any close that is not of the innermost open is refused.
                if let open = braces.last, open != (c == "]" ? "[" : "{") {
                    throw fail("'\(c)' where '\(open == "[" ? "]" : "}")' or a value was expected")
                }
                _ = braces.popLast()
            default:
                break
            }
            i += 1
        }
    }

    static func error(_ error: TOMLParseError, text: String, file: String) -> ConfigError {
        let lineNumber = max(1, Int(error.source.begin.line))
        let column = max(1, Int(error.source.begin.column))
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let line = lineNumber <= lines.count ? lines[lineNumber - 1].trimmingCharacters(in: .whitespaces) : ""
        let key = keyName(line: line, before: lines.prefix(lineNumber - 1))
        // A [[hosts]] line may hold a secret header value: only its key is shown.
        let secret = key?.hasPrefix("hosts.") == true || (key == nil && line.contains("=") && table(before: lines.prefix(lineNumber - 1)) == "hosts")
        let visible = secret ? (line.split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) + " = …" } ?? "…") : line
        let shown = TerminalSafe.sanitize(String(visible.prefix(80)))
        // toml++'s words quote what it saw, which may be anything the file holds (an escape sequence found by
        // FuzzTests: "not a number (at 'i\u{1B}')").
        let explanation = TerminalSafe.sanitize(explain(error.description, line: line))
        return ConfigError("\(file):\(lineNumber):\(column): \(key.map { "\($0): " } ?? "")`\(shown)`: \(explanation)")
    }

    /// `table.key` for a `key = ...` line (the table from the last header above it); nil for other lines.
    static func keyName(line: String, before: ArraySlice<String>) -> String? {
        guard !line.hasPrefix("["), let equals = line.firstIndex(of: "=") else { return nil }
        let key = line[..<equals].trimmingCharacters(in: .whitespaces)
        guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == "." }) else { return nil }
        guard let name = table(before: before), !name.isEmpty else { return TerminalSafe.sanitize(key) }
        return TerminalSafe.sanitize("\(name).\(key)")
    }

    /// The table of the last header above a line; nil at the top level.
    static func table(before: ArraySlice<String>) -> String? {
        before.last(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("[") }).map(tableName(header:))
    }

    /// The table a header line opens: `[name]`, `[[name]]`, with or without a comment after it.
    static func tableName(header: String) -> String {
        let line = header.trimmingCharacters(in: .whitespaces)
        let table = line.split(separator: "#").first.map(String.init) ?? ""
        return table.trimmingCharacters(in: CharacterSet(charactersIn: "[] \t"))
    }

    /// toml++'s description, said in words where we know the case; its own text otherwise.
    static func explain(_ description: String, line: String) -> String {
        let value = line.firstIndex(of: "=").map { line[line.index(after: $0)...].trimmingCharacters(in: .whitespaces) } ?? ""
        let saw = description.range(of: "saw '").map { String(description[$0.upperBound...].dropLast()) }
            .map { $0 == "\\n" ? "the end of the line" : "'\($0)'" }
        let words = "put text in quotes (\"...\"), or write a number, true or false"
        if description.contains("could not determine value type") || description.contains("expected value") {
            if value.isEmpty || value.hasPrefix("=") || value.hasPrefix("#") { return "expected a value after '='" }
            if ["yes", "no", "on", "off"].contains(value.lowercased()) { return "expected true or false (or text in quotes)" }
            return "not a value: \(words)"
        }
        if description.contains("cannot redefine existing table") { return "this table appears twice; keep its keys under one header" }
        if description.contains("cannot redefine existing") { return "this key is set twice in its table" }
        if description.contains("parsing table header") && description.contains("expected ']'") { return "the table header needs a closing ']'" }
        if description.contains("control characters") || description.contains("parsing string") && description.contains("end of input") {
            return "a quoted string is not closed on its line"
        }
        if description.contains("closing '}'") { return "an inline table { ... } must close with '}' on its own line" }
        if description.contains("expected '='") { return "expected '=' between the key and its value" }
        if description.contains("expected a comment or whitespace") {
            return "unexpected \(saw ?? "text") after the value: one value per line; \(words)"
        }
        if description.contains("expected keys, tables") { return "expected a key (name = value) or a [table] header" }
        if description.contains("integer") || description.contains("floating-point") {
            return "not a number\(saw.map { " (at \($0))" } ?? ""); text such as 2M goes in quotes"
        }
        // toml++'s own words, without its "Error while parsing ...:" preamble.
        if let colon = description.range(of: ": "), description.hasPrefix("Error while parsing") {
            return String(description[colon.upperBound...])
        }
        return description
    }

    /// The known name nearest to `name`, when it is a slip of at most a third of its letters (at least one).
    static func nearest(to name: String, among known: [String]) -> String? {
        let limit = max(1, name.count / 3)
        let scored = known.map { ($0, distance(name.lowercased(), $0)) }.filter { $0.1 <= limit }
        return scored.min { $0.1 < $1.1 }?.0
    }

    /// Levenshtein distance (an insertion, a deletion or a change costs 1).
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
