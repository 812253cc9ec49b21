import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response's status line and headers, as libcurl hands them over one line at a time.
struct ResponseHead {
    private(set) var status = 0
    private(set) var version = "HTTP/1.1"
    private(set) var fields: [(name: String, value: String)] = []
    /// The blank line after a final (non-1xx) response's headers has arrived.
    private(set) var complete = false

    mutating func add(line raw: String) {
        let line = raw.trimmingCharacters(in: CharacterSet(charactersIn: "\r\n"))
        if line.isEmpty {
            // An interim answer (100 Continue) is followed by the real one.
            if status >= 200 { complete = true } else { fields = [] }
            return
        }
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            version = parts.first.map(String.init) ?? version
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            fields = []
            complete = false
            return
        }
        if let first = line.first, first == " " || first == "\t", !fields.isEmpty {
            // An obsolete folded line continues the previous header.
            fields[fields.count - 1].value += " " + line.trimmingCharacters(in: .whitespaces)
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty else { return }
        fields.append((name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
    }

    func value(_ name: String) -> String? {
        fields.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    func httpResponse(url: URL) -> HTTPURLResponse? {
        var headers: [String: String] = [:]
        for (name, value) in fields {
            if let existing = headers.first(where: { $0.key.caseInsensitiveCompare(name) == .orderedSame })?.key {
                headers[existing]! += ", " + value
            } else {
                headers[name] = value
            }
        }
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: version, headerFields: headers)
    }
}
