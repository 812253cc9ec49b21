import FerryCore
import Foundation

/// The prompts' work on the file system, out of the reducer (which stays a function of the keys and the
/// answers it is given): Tab's completion of a path, the check of a folder to save into (made when missing, as
/// `-o` makes it), the check of a file to upload. The reducer asks with a Command; whoever runs the app does
/// it (TerminalApp, off the main thread: a Tab in a slow network directory must not freeze the screen) and
/// hands the answer back to `reduce(_:answer:)`.
public enum FileAnswer: Sendable, Equatable {
    /// What `text` completes to.
    case completed(text: String, PathCompletion.Result)
    /// The folder typed (`text`) as an absolute directory that can be written, or why not; `url`: the URL typed
    /// before it, which the prompt goes back to.
    case folder(text: String, Checked, url: String)
    /// The file typed (`text`) as an absolute path that can be read, or why not.
    case uploadFile(text: String, Checked)

    /// A path that passed its check, or the words that say why it did not.
    public enum Checked: Sendable, Equatable {
        case path(String)
        case refused(String)
    }
}

public enum FileEffects {
    /// Carries out a Command that asks the file system, relative to `cwd`; nil for the others.
    public static func perform(_ command: Command, cwd: String) -> FileAnswer? {
        switch command {
        case let .completePath(text, directoriesOnly):
            return .completed(text: text, PathCompletion.complete(text, cwd: cwd, directoriesOnly: directoriesOnly))
        case let .checkFolder(text, url):
            do throws(UsageError) {
                return .folder(text: text, .path(try InputValidation.writableDirectory(PathCompletion.absolute(text, cwd: cwd), relativeTo: cwd)),
                               url: url)
            } catch {
                return .folder(text: text, .refused(TerminalSafe.sanitize(error.description)), url: url)
            }
        case let .checkUploadFile(text):
            let path = PathCompletion.absolute(text, cwd: cwd)
            return .uploadFile(text: text, unreadable(path).map { .refused($0) } ?? .path(path))
        default:
            return nil
        }
    }

    /// Why an upload's file cannot be sent (gone, unreadable), or nil: asked once more as the add is carried out
    /// (the file may have gone while its URL was typed).
    public static func unreadableUpload(_ spec: TransferSpec) -> String? {
        guard spec.direction == .upload, case let .file(path)? = spec.upload?.primarySource else { return nil }
        return unreadable(path)
    }

    /// Why the file at `path` cannot be sent, in words, or nil.
    static func unreadable(_ path: String) -> String? {
        do throws(BodyError) {
            _ = try BodyPlan.checkedFileLength(path)
            return nil
        } catch {
            return TerminalSafe.sanitize(error.description)
        }
    }
}
