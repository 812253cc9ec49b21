import Foundation

/// A directory's listing as `ls -l` writes it, which sftp servers send (OpenSSH's sftp-server: a "long name"
/// per entry) and most ftp servers answer a `LIST` with:
/// `-rw-r--r--    1 user  group     4096 Nov 27 10:00 name with blanks`. The transport hands a sftp or ftp
/// directory's listing over as such lines (`contentType`); a tree's walk reads them.
public enum DirectoryLines {
    /// The answer's type when its body is `ls -l` lines.
    public static let contentType = "text/x-ferry-ls"

    public struct Entry: Sendable, Equatable {
        public var name: String
        public var isDirectory: Bool
        public var size: Int64?
    }

    /// Plain files and directories (a symlink, a device or a socket is not an entry: a walk does not follow a
    /// link); "." and ".." left out. A line that is not in `ls -l`'s form is skipped.
    public static func entries(_ body: Data) -> [Entry] {
        var out: [Entry] = []
        for raw in body.split(separator: UInt8(ascii: "\n")) {
            var line = raw[...]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            guard let text = String(bytes: line, encoding: .utf8), let entry = entry(text) else { continue }
            out.append(entry)
        }
        return out
    }

    /// Nine fields: mode, links, owner, group, size, month, day, time or year, then the name (all that follows,
    /// blanks kept).
    static func entry(_ line: String) -> Entry? {
        let type = line.first
        guard type == "-" || type == "d" else { return nil }
        var fields = 0
        var index = line.startIndex
        // Skip eight fields and the blanks after each.
        while fields < 8 {
            guard let blank = line[index...].firstIndex(of: " ") else { return nil }
            index = line[blank...].firstIndex { $0 != " " } ?? line.endIndex
            fields += 1
        }
        let name = String(line[index...])
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        let parts = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
        guard parts.count >= 5 else { return nil }
        let isDirectory = type == "d"
        return Entry(name: name, isDirectory: isDirectory, size: isDirectory ? nil : Int64(parts[4]))
    }
}
