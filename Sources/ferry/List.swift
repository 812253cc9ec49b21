import ArgumentParser
import FerryCore
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the queue (readable while an engine runs).",
        discussion: "Header values are never printed; URLs are shown without credentials."
    )

    @Flag(name: .customLong("json"), help: "Print a JSON array of objects instead of a table.")
    var json = false

    @OptionGroup var common: CommonOptions

    func run() throws {
        _ = try common.loadConfig()  // a broken config is reported by every command
        let directory = common.stateDirectory
        guard FileManager.default.fileExists(atPath: directory.databasePath) else {
            print(json ? "[]" : "the queue is empty")
            return
        }
        let items: [StoredTransfer]
        do {
            items = try directory.openStore().loadAll()
        } catch {
            throw StateError("cannot read the queue at \(directory.databasePath): \(error)")
        }
        if json {
            FileHandle.standardOutput.write(try QueueListing.json(items))
            print()
        } else {
            print(QueueListing.table(items), terminator: "")
        }
    }
}
