import Foundation

/// Tab in a prompt that takes a path (the file to upload, the folder to save into): the text completed as
/// far as the entries on disk agree, a directory with its `/`, and the entries it could be when several.
public enum PathCompletion {
    public struct Result: Equatable, Sendable {
        public var text: String
        /// The names it could go on to, when more than one (at most a screenful is worth showing).
        public var candidates: [String]
    }

    /// `text` completed among the entries of its directory (relative to `cwd`; a leading `~/` is the home
    /// directory). Hidden entries only when the name typed starts with a dot; `directoriesOnly` for a folder.
    public static func complete(_ text: String, cwd: String, directoriesOnly: Bool = false,
                                home: String = NSHomeDirectory()) -> Result {
        let slash = text.lastIndex(of: "/")
        let typedDirectory = slash.map { String(text[...$0]) } ?? ""
        let prefix = slash.map { String(text[text.index(after: $0)...]) } ?? text
        let directory = absolute(typedDirectory.isEmpty ? "." : typedDirectory, cwd: cwd, home: home)
        let entries = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix(prefix) && (prefix.hasPrefix(".") || !$0.hasPrefix(".")) }
            .map { name -> String in
                var isDirectory: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory)
                return isDirectory.boolValue ? name + "/" : name
            }
            .filter { !directoriesOnly || $0.hasSuffix("/") }
            .sorted()
        guard let first = entries.first else { return Result(text: text, candidates: []) }
        // As far as every entry agrees.
        var common = first
        for entry in entries.dropFirst() {
            while !entry.hasPrefix(common) { common.removeLast() }
        }
        return Result(text: typedDirectory + (common.count > prefix.count ? common : prefix), candidates: entries.count > 1 ? entries : [])
    }

    /// A typed path as an absolute one: `~/` is the home directory, a relative path is under `cwd`.
    public static func absolute(_ path: String, cwd: String, home: String = NSHomeDirectory()) -> String {
        let expanded = path == "~" ? home : path.hasPrefix("~/") ? home + path.dropFirst(1) : path
        return URL(fileURLWithPath: expanded, relativeTo: URL(fileURLWithPath: cwd, isDirectory: true)).standardizedFileURL.path
    }
}
