import Foundation

/// Standard output and error as ferry writes them: never trapping. `FileHandle.write(_: Data)` traps when the
/// reader went away (EPIPE: `ferry get ... 2>&1 | head`, a parent that died), and a progress line would
/// then take the transfers with it; a line that cannot be written is dropped instead.
enum Output {
    static func out(_ data: Data) { try? FileHandle.standardOutput.write(contentsOf: data) }
    /// While a progress readout is drawn, above it (LiveReadout).
    static func error(_ text: String) {
        if let live = LiveReadout.current.withLock({ $0 }) { return live.above(text) }
        try? FileHandle.standardError.write(contentsOf: Data(text.utf8))
    }
}
