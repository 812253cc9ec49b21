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
        // Eight fields and the blanks after each; the fifth is the size.
        var index = line.startIndex
        var size: Int64?
        for field in 0..<8 {
            guard let blank = line[index...].firstIndex(of: " ") else { return nil }
            if field == 4 { size = Int64(line[index..<blank]) }
            index = line[blank...].firstIndex { $0 != " " } ?? line.endIndex
        }
        let name = String(line[index...])
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        let isDirectory = type == "d"
        return Entry(name: name, isDirectory: isDirectory, size: isDirectory ? nil : size)
    }
}
