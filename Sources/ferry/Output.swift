import Foundation

/// Standard output and error as ferry writes them: never trapping. `FileHandle.write(_: Data)` traps when the
/// reader went away (EPIPE: `ferry get ... 2>&1 | head`, a parent that died), and a progress line would
/// then take the transfers with it; a line that cannot be written is dropped instead.
enum Output {
    static func out(_ data: Data) { try? FileHandle.standardOutput.write(contentsOf: data) }
    static func error(_ text: String) { try? FileHandle.standardError.write(contentsOf: Data(text.utf8)) }
}
