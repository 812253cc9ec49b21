import ArgumentParser
import FerryCore
import Foundation

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the queue (readable while an engine runs).",
        discussion: "Header values are never printed; URLs are shown without credentials."
    )

    @Flag(name: .customLong("json"), help: "Print a JSON array of objects instead of a table.")
    var json = false

    @Option(name: .customLong("state"), help: ArgumentHelp("Only the items in these states, comma-separated: \(TransferState.names).", valueName: "states"))
    var states: String?

    @Option(name: .customLong("batch"), help: ArgumentHelp("Only the items of this batch.", valueName: "id"))
    var batch: Int64?

    @OptionGroup var common: StateOptions

    func run() throws {
        // A broken config is said, but reading the queue does not need it (ferry stop works the same way).
        do throws(ConfigError) { _ = try common.loadConfig() } catch { printError("\(error.description) (the queue is listed anyway)") }
        let directory = common.stateDirectory
        let view = QueueView(states: try states.map { (text: String) throws(UsageError) in try Selection.states(text) }, batch: batch)
        // A header naming the columns for a person at a terminal; none for a script reading a pipe.
        // Nothing listed under a --state or --batch says so, not that the queue is empty.
        let asked = [states.map { "--state \(TerminalSafe.sanitize($0))" }, batch.map { "--batch \($0)" }].compactMap { $0 }
        let empty = asked.isEmpty ? "the queue is empty" : "no items match " + asked.joined(separator: " ")
        let surroundings = QueueListing.surroundings(in: directory)
        let stream = QueueListing.Stream(json: json, header: isatty(STDOUT_FILENO) != 0, lastID: surroundings.lastID,
                                         empty: empty) {
            Output.out($0)
        }
        stream.trees = surroundings.trees
        try QueueListing.items(of: view, in: directory, rates: { stream.rates = $0 }) { stream.add($0) }
        stream.finish()
        // A tree still being walked has more files to come: said below the table (a person reads it; JSON stays
        // the items' array).
        guard !json else { return }
        for walk in surroundings.walksUnderWay where batch == nil || walk.batch == batch {
            if let line = walk.listLine(tree: stream.trees[walk.batch] ?? "") { Output.out(Data((line + "\n").utf8)) }
        }
    }
}
