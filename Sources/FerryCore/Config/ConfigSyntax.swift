import Foundation
import TOMLKit

/// Config messages in words: a TOML syntax error becomes "file:line:column: `the line`: what was expected",
/// and an unknown key is met with the nearest known one.
enum ConfigSyntax {
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
        let explanation = explain(error.description, line: line)
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
        guard let header = before.last(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix("[") }) else { return nil }
        let table = header.trimmingCharacters(in: .whitespaces).split(separator: "#").first.map(String.init) ?? ""
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
