@_spi(Testing) import FerryEngine
import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI

/// The reducer is a pure function: keys and a snapshot in, state and engine commands out. No engine needed.
@Suite struct ReducerTests {
    let queue = Fixtures.queue()

    func press(_ keys: [Key], _ start: AppState? = nil, queue: QueueSnapshot? = nil) -> (AppState, [Command]) {
        Fixtures.press(keys, from: start ?? Fixtures.state(), on: queue ?? self.queue)
    }

    @Test func jThenPPausesTheSecondRow() {
        let (state, commands) = press([.character("j"), .character("p")])
        #expect(state.selectedID == TransferID(2))
        #expect(commands == [.pause(TransferID(2))])
        #expect(press([.down, .down, .down, .down, .character(" ")]).1 == [.resume(TransferID(5))])
    }

    @Test func movementClampsAndJumps() {
        #expect(press([.up]).0.selectedID == TransferID(1))
        #expect(press([.character("G")]).0.selectedID == TransferID(9))
        #expect(press([.character("G"), .character("g")]).0.selectedID == TransferID(1))
        #expect(press([.pageDown]).0.selectedID == TransferID(9))  // 12 rows: past the end
        #expect(press([.character("J")]).1 == [.move(TransferID(1), .down)])
        #expect(press([.character("j"), .character("K")]).1 == [.move(TransferID(2), .up)])
    }

    @Test func quitDetachesAtOnceAndStoppingTheEngineAsks() {
        // q leaves the transfers to the engine: nothing to ask.
        #expect(press([.character("q")]).1 == [.quit])
        #expect(press([.character("q")]).0.confirmation == nil)
        let (asking, none) = press([.character("Q")])
        #expect(asking.confirmation == .stopEngine(running: 4))
        #expect(none.isEmpty)
        #expect(press([.character("Q"), .character("n")]).0.confirmation == nil)
        #expect(press([.character("Q"), .character("n")]).1.isEmpty)
        #expect(press([.character("Q"), .character("y")]).1 == [.stopEngine])
        let idle = QueueSnapshot(version: 1, items: [Fixtures.item(1, "a", .completed)], totals: QueueTotals(), maxConcurrent: 4, maxPerHost: 4)
        #expect(press([.character("Q")], queue: idle).0.confirmation == .stopEngine(running: 0))
        #expect(press([.character("Q"), .character("y")], queue: idle).1 == [.stopEngine])
    }

    @Test func removeAsksAndDeletesThePartialOnlyWithCapitalD() {
        #expect(press([.character("d"), .character("y")]).1 == [.remove(TransferID(1), deletePartial: false)])
        #expect(press([.character("D"), .character("y")]).1 == [.remove(TransferID(1), deletePartial: true)])
        #expect(press([.delete, .escape]).1.isEmpty)
    }

    @Test func addDownloadPromptsAndValidates() {
        let typed = "gopher://x".map { Key.character($0) }
        let (refused, none) = press([.character("a")] + typed + [.enter])
        #expect(none.isEmpty)
        #expect(refused.prompt?.error?.isEmpty == false)
        let good = "http://127.0.0.1:8080/f.bin".map { Key.character($0) }
        let (done, commands) = press([.character("a")] + good + [.enter])
        #expect(done.prompt == nil)
        #expect(commands == [.add([TransferSpec(download: URL(string: "http://127.0.0.1:8080/f.bin")!, directory: "/home/me/Downloads")])])
        #expect(press([.character("a"), .character("x"), .escape]).0.prompt == nil)
    }

    @Test func addUploadAsksForAFileThenAURL() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-upload-\(getpid()).txt")
        try Data("hi".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let missing = press([.character("u")] + "/no/such/file".map { .character($0) } + [.enter]).0
        #expect(missing.prompt?.kind == .uploadFile)
        #expect(missing.prompt?.error?.contains("/no/such/file") == true)
        let (state, commands) = press([.character("u")] + file.path.map { .character($0) } + [.enter]
                                      + "https://example.com/up".map { .character($0) } + [.enter])
        #expect(state.prompt == nil)
        guard case let .add(specs) = commands.first, let spec = specs.first, specs.count == 1 else { Issue.record("no add"); return }
        #expect(spec.direction == .upload)
        #expect(spec.upload?.primarySource == .file(path: file.path))
    }

    @Test func filterViewsAndConcurrency() {
        let (filtered, _) = press([.character("/"), .character("I"), .character("S"), .character("O"), .enter])
        #expect(filtered.visibleItems(queue).map(\.id) == [TransferID(1), TransferID(6)])
        #expect(press([.character("/"), .character("z"), .escape]).0.filter == "")
        #expect(press([.character("/"), .character("z"), .enter, .escape]).0.filter == "")
        #expect(press([.character("2")]).0.visibleItems(queue).map(\.id) == [TransferID(1), TransferID(2), TransferID(3), TransferID(4)])
        #expect(press([.character("5")]).0.visibleItems(queue).map(\.id) == [TransferID(6), TransferID(9)])
        #expect(press([.character("+")]).1 == [.setConcurrency(5)])
        #expect(press([.character("-")]).1 == [.setConcurrency(3)])
    }

    @Test func detailHelpAndBack() {
        let (detail, _) = press([.character("j"), .enter])
        #expect(detail.screen == .detail(TransferID(2)))
        #expect(press([.character("j"), .enter, .escape]).0.screen == .list)
        #expect(press([.character("?")]).0.screen == .help)
        #expect(press([.character("?"), .escape]).0.screen == .list)
        #expect(press([.character("c")]).1 == [.cancel(TransferID(1))])
        #expect(press([.character("j"), .character("j"), .character("j"), .character("j"), .character("j"), .character("r")]).1 == [.retry(TransferID(6))])
        #expect(press([.character("P")]).1 == [.pauseAll])
    }

    @Test func keymapBindsEachKeyOnceAndFeedsTheFooter() {
        var seen = Set<Key>()
        for binding in Keymap.standard.bindings {
            for key in binding.keys { #expect(seen.insert(key).inserted, "\(key) bound twice") }
        }
        #expect(Keymap.standard.footerEntries.first?.label == "Help")
    }

    @Test func lineEditor() {
        var editor = LineEditor("helo")
        _ = editor.apply(.left)
        _ = editor.apply(.character("l"))
        #expect(editor.text == "hello")
        _ = editor.apply(.character("\u{1B}"))
        #expect(editor.text == "hello")
        _ = editor.apply(.control("w"))
        #expect(editor.text == "o")
    }

    func typing(_ text: String) -> [Key] { text.map { .character($0) } }

    @Test func lSetsTheSelectedItemsLimitFromAPromptThatShowsTheCurrentOne() {
        var limited = queue
        limited.items[1].rateLimit = 2 << 20
        let (asking, none) = press([.character("j"), .character("l")], queue: limited)
        #expect(asking.prompt?.kind == .itemLimit(TransferID(2)))
        #expect(asking.prompt?.editor.text == "2M")
        #expect(none.isEmpty)
        // Ctrl-U clears the line; then a new rate.
        let (done, commands) = press([.character("j"), .character("l"), .control("u")] + typing("500K") + [.enter], queue: limited)
        #expect(done.prompt == nil)
        #expect(commands == [.setItemLimit(TransferID(2), 500 << 10)])
        let (lifted, off) = press([.character("l"), .control("u")] + typing("off") + [.enter])
        #expect(off == [.setItemLimit(TransferID(1), nil)])
        #expect(lifted.message?.text == "#1 no longer limited", "not 'limited to unlimited'")
    }

    @Test func aBadRateKeepsThePromptAndSaysWhy() {
        let (state, commands) = press([.character("l"), .control("u")] + typing("fast") + [.enter])
        #expect(commands.isEmpty)
        #expect(state.prompt?.kind == .itemLimit(TransferID(1)))
        #expect(state.prompt?.error?.contains("not a rate: 'fast'") == true)
    }

    @Test func capitalLAsksForTheDownloadThenTheUploadLimit() {
        var limited = queue
        limited.downloadLimit = 1 << 20
        let (first, _) = press([.character("L")], queue: limited)
        #expect(first.prompt?.kind == .globalDownloadLimit)
        #expect(first.prompt?.editor.text == "1M")
        let keys: [Key] = [.character("L"), .control("u")] + typing("1.5M") + [.enter]
        let (second, none) = press(keys, queue: limited)
        #expect(second.prompt?.kind == .globalUploadLimit(download: 3 << 19))
        #expect(second.prompt?.editor.text == "off")
        #expect(none.isEmpty)
        let (done, commands) = press(keys + [.control("u")] + typing("256K") + [.enter], queue: limited)
        #expect(done.prompt == nil)
        #expect(commands == [.setGlobalLimits(download: 3 << 19, upload: 256 << 10)])
    }

    /// Issue 24, bug 2: two URLs pasted into the `a` prompt became one bad URL (`s1.bin%20http://...`). Each is
    /// a download, all in one add; a bad one is named and nothing is added.
    @Test func twoPastedURLsAreTwoDownloadsInOneAdd() {
        let pasted = typing("http://h/s1.bin  http://h/s2.bin\t")
        let (done, commands) = press([.character("a")] + pasted + [.enter])
        #expect(done.prompt == nil)
        #expect(commands == [.add(["http://h/s1.bin", "http://h/s2.bin"].map {
            TransferSpec(download: URL(string: $0)!, directory: "/home/me/Downloads")
        })])
        #expect(done.message?.text == "added 2 downloads, the first http://h/s1.bin")
        let (refused, none) = press([.character("a")] + typing("http://h/s1.bin gopher://h/s2.bin") + [.enter])
        #expect(none.isEmpty)
        #expect(refused.prompt?.error?.hasPrefix("URL 2 of 2: unsupported scheme 'gopher'") == true)
    }

    /// URLs pasted one per line into the `a` prompt: the first line break submitted the prompt and the rest ran
    /// as keys (`p` of `http` paused the selected item, `/` opened a filter). A bracketed paste is one event: its
    /// lines are blanks in the prompt, so the URLs are several downloads in one add.
    @Test func urlsPastedOnePerLineAreDownloadsNotKeys() {
        let paste = Key.paste("http://h/s1.bin\nhttp://h/s2.bin\r\n")
        let (prompted, none) = press([.character("a"), paste])
        #expect(none.isEmpty)
        #expect(prompted.prompt?.kind == .downloadURL)
        #expect(prompted.prompt?.editor.text == "http://h/s1.bin http://h/s2.bin ")
        let (done, commands) = press([.character("a"), paste, .enter])
        #expect(done.prompt == nil)
        #expect(commands == [.add(["http://h/s1.bin", "http://h/s2.bin"].map {
            TransferSpec(download: URL(string: $0)!, directory: "/home/me/Downloads")
        })])
    }

    /// A list pasted with its comments (lines that start with `#`, as an `-i` file has them) adds its URLs; the
    /// comments were taken for URLs and refused the whole add.
    @Test func aPastedListKeepsItsURLsAndDropsItsComments() {
        let list = Key.paste("# mirrors\nhttp://h/s1.bin\n  # the second\nhttp://h/s2.bin\n")
        let (done, commands) = press([.character("a"), list, .enter])
        #expect(done.prompt == nil, "\(done.prompt?.error ?? "")")
        #expect(commands == [.add(["http://h/s1.bin", "http://h/s2.bin"].map {
            TransferSpec(download: URL(string: $0)!, directory: "/home/me/Downloads")
        })])
        #expect(press([list]).0.prompt?.editor.text == "http://h/s1.bin http://h/s2.bin")
        // In the filter, a pasted `#12` is an id to look for, not a comment.
        let (filtering, _) = press([.character("/"), .paste("#12")])
        #expect(filtering.filter == "#12")
    }

    /// Pasted into the list (no prompt open), the text is not commands either: the add prompt opens with it, for
    /// Enter to add. A paste never answers a question, and the help and detail screens ignore it.
    @Test func aPasteOutsideAPromptOpensTheAddPromptWithIt() {
        let (state, commands) = press([.paste("  http://h/pause.bin\nhttp://h/cancel.bin\n")])
        #expect(commands.isEmpty)
        #expect(state.prompt?.kind == .downloadURL)
        #expect(state.prompt?.editor.text == "http://h/pause.bin http://h/cancel.bin")
        let (asked, _) = press([.character("d")])
        #expect(asked.confirmation != nil)
        let (still, none) = press([.paste("y")], asked)
        #expect(still.confirmation == asked.confirmation)
        #expect(none.isEmpty)
        let (help, _) = press([.character("?")])
        #expect(press([.paste("http://h/x")], help).0.prompt == nil)
    }

    /// Issue 24, bug 1: each press counted from the last value the frame showed, so four quick presses raised
    /// the cap by one. Presses add up until the engine's snapshot shows a new value.
    @Test func plusPressedFourTimesQuicklyAsksForFourMore() {
        let plus = Array(repeating: Key.character("+"), count: 4)
        let (state, commands) = press(plus)
        #expect(commands == [.setConcurrency(5), .setConcurrency(6), .setConcurrency(7), .setConcurrency(8)])
        #expect(state.message?.text == "8 transfers at once")
        #expect(press(plus + [.character("-")]).1.last == .setConcurrency(7))
        // The engine has answered (the snapshot shows another value): counted from what it shows.
        var answered = queue
        answered.maxConcurrent = 8
        #expect(reduce(state, .character("+"), answered).1 == [.setConcurrency(9)])
        answered.maxConcurrent = 6
        #expect(reduce(state, .character("-"), answered).1 == [.setConcurrency(5)])
        // At the floor nothing is asked, however often pressed.
        var one = queue
        one.maxConcurrent = 1
        #expect(press([.character("-"), .character("-")], queue: one).1.isEmpty)
    }

    /// Issue 24, bug 3: the limit prompts were prefilled with the current value and typing appended to it
    /// (`off500K`, refused). The value is selected: typing replaces it, a cursor key keeps it to edit.
    @Test func aLimitPromptsValueIsSelectedSoTypingReplacesIt() {
        var limited = queue
        limited.items[1].rateLimit = 2 << 20
        let (asking, _) = press([.character("j"), .character("l")], queue: limited)
        #expect(asking.prompt?.editor.selected == true && asking.prompt?.editor.text == "2M")
        #expect(press([.character("j"), .character("l")] + typing("500K") + [.enter], queue: limited).1
                == [.setItemLimit(TransferID(2), 500 << 10)])
        #expect(press([.character("l")] + typing("1M") + [.enter]).1 == [.setItemLimit(TransferID(1), 1 << 20)])
        // A cursor key keeps the value: Left, then a digit, edits "2M" into "20M".
        #expect(press([.character("j"), .character("l"), .left, .character("0"), .enter], queue: limited).1
                == [.setItemLimit(TransferID(2), 20 << 20)])
        // Backspace clears the selected value at once.
        #expect(press([.character("j"), .character("l"), .backspace], queue: limited).0.prompt?.editor.text == "")
        // L then its upload step, both prefilled: typing replaces each.
        let keys: [Key] = [.character("L")] + typing("2M") + [.enter] + typing("500K") + [.enter]
        #expect(press(keys).1 == [.setGlobalLimits(download: 2 << 20, upload: 500 << 10)])
        // The filter prompt is not a value to replace: it is refined.
        #expect(press([.character("/")]).0.prompt?.editor.selected == false)
    }

    @Test func plusNeverLowersTheCapSetWithJ() {
        var many = queue
        many.maxConcurrent = 100
        #expect(press([.character("+")], queue: many).1 == [.setConcurrency(101)])
        #expect(press([.character("-")], queue: many).1 == [.setConcurrency(99)])
    }
}

/// Issue 24: marks and the actions on many (m, M, R, X).
@Suite struct MarkTests {
    let queue = Fixtures.queue()

    func press(_ keys: [Key], _ start: AppState? = nil) -> (AppState, [Command]) {
        Fixtures.press(keys, from: start ?? Fixtures.state(), on: queue)
    }

    @Test func mMarksAndMovesDownAndTheActionsActOnTheMarks() {
        let m = Key.character("m")
        let (marked, none) = press([m, m])
        #expect(none.isEmpty && marked.marks.ids == [TransferID(1), TransferID(2)] && marked.selectedID == TransferID(3))
        let both = Selection(ids: [1, 2])
        #expect(press([m, m, .character("p")]).1 == [.queueSaying(.pause(both))])
        #expect(press([m, m, .character("c")]).1 == [.queueSaying(.cancel(both))])
        #expect(press([m, m, .character("r")]).1 == [.queueSaying(.retry(both))])
        #expect(press([m, m, .character("J")]).1 == [.queue(.move(both, .down))])
        #expect(press([m, m, .character("K")]).1 == [.queue(.move(both, .up))])
        // Remove asks once for all of them, and the marks go with them.
        let (asking, nothing) = press([m, m, .character("d")])
        #expect(nothing.isEmpty && asking.confirmation?.question == "Remove the 2 marked items from the queue? (y/n)")
        let (removed, commands) = press([m, m, .character("D"), .character("y")])
        #expect(commands == [.queue(.remove(both, deletePart: true))] && removed.marks.isEmpty)
        // m again unmarks; Esc clears the marks (then the filter); and with none, keys act on the selection.
        #expect(press([m, .character("k"), m]).0.marks.isEmpty)
        let (cleared, _) = press([m, m, .escape])
        #expect(cleared.marks.isEmpty && cleared.message?.text == "marks cleared")
        #expect(press([m, .escape, .character("c")]).1 == [.cancel(TransferID(2))])
    }

    @Test func marksOfPausedItemsResumeThem() {
        let (state, commands) = press([.down, .down, .down, .down, .character("m"), .character("p")])
        #expect(state.marks.ids == [TransferID(5)])
        #expect(commands == [.queueSaying(.resume(Selection(ids: [5])))])
    }

    @Test func capitalMMarksTheWholeViewAsTheEngineChoosesIt() {
        // Every item of the failed view with a filter: the engine resolves the view, the screen holds a window.
        var start = Fixtures.state()
        start.view = .failed
        start.filter = "iso"
        let (state, _) = press([.character("M")], start)
        #expect(!state.marks.isEmpty && state.marks.count == 1)
        #expect(press([.character("M"), .character("r")], start).1 == [.queueSaying(.retry(Selection(states: [.failed, .cancelled], filter: "iso", upTo: 9)))])
        // One unmarked after M is left out; a second M clears them.
        let (some, _) = press([.character("M"), .character("m")])
        #expect(some.marks.count == 8)
        #expect(press([.character("M"), .character("m"), .character("c")]).1 == [.queueSaying(.cancel(Selection(all: true, except: [1], upTo: 9)))])
        #expect(press([.character("M"), .character("M")]).0.marks.isEmpty)
    }

    /// M marks the view's items there are now: one added afterwards (by another ferry get) is not marked, and
    /// the command leaves it out (p paused it, and c or d would have taken items the user never saw).
    @Test func capitalMDoesNotMarkItemsAddedAfterIt() {
        let (marked, _) = press([.character("M")])
        var later = queue
        later.items.append(Fixtures.item(10, "later.iso", .queued))
        later.totals.count[.queued, default: 0] += 1
        later.totals.lastID = 10
        #expect(marked.marks.contains(later.items[0]) && !marked.marks.contains(later.items[9]))
        let selection = marked.marks.selection
        #expect(selection.upTo == 9)
        let chosen = selection.choose(among: later.items.map { ($0.id, $0.state, $0.batch) })
        #expect((try? chosen.get())?.map(\.rawValue) == Array(1...9))
    }

    /// Issue 41: the footer offers what applies to the item the keys act on: no `Space Pause` on a done item,
    /// `Space Resume` on a paused one, `r Retry` only on one that can be retried.
    @Test func theFooterOffersWhatAppliesToTheSelectedItem() {
        func labels(_ state: TransferState?) -> [String] { Keymap.standard.footerEntries(onList: true, selected: state).map(\.label) }
        #expect(labels(nil).contains("Pause") && labels(nil).contains("Cancel") && labels(nil).contains("Retry"))
        #expect(!labels(.completed).contains("Pause") && !labels(.completed).contains("Resume") && !labels(.completed).contains("Cancel")
                && !labels(.completed).contains("Retry"), "\(labels(.completed))")
        #expect(labels(.paused).contains("Resume") && !labels(.paused).contains("Pause"))
        #expect(labels(.running).contains("Pause") && !labels(.running).contains("Retry"))
        #expect(labels(.failed).contains("Retry") && !labels(.failed).contains("Pause") && !labels(.failed).contains("Cancel"))
        #expect(labels(.completed).first == "Help" && labels(.completed).last == "Detach")
    }

    @Test func capitalRRetriesTheFailedOfTheViewAndXClearsTheFinishedAfterAsking() {
        #expect(press([.character("R")]).1 == [.queueSaying(.retry(Selection(states: [.failed])))])
        var active = Fixtures.state()
        active.view = .active
        let (refused, none) = press([.character("R")], active)
        #expect(none.isEmpty && refused.message?.text == "this view shows no failed items")

        let (asking, nothing) = press([.character("X")])
        #expect(nothing.isEmpty && asking.confirmation?.question == "Clear the 1 finished item of this view from the list? Their files stay. (y/n)")
        // Issue 41: said with what the engine removed, counted (queueSaying), not "cleared the finished items".
        #expect(press([.character("X"), .character("y")]).1 == [.queueSaying(.remove(Selection(states: [.completed]), deletePart: false))])
        #expect(press([.character("X"), .character("n")]).1.isEmpty)
        var filtered = Fixtures.state()
        filtered.filter = "song"
        #expect(press([.character("X"), .character("y")], filtered).1 == [.queueSaying(.remove(Selection(states: [.completed], filter: "song"), deletePart: false))])
    }
}

/// Issue 24, bug 2: `a` shows the folder it saves into and Tab changes it; `u` sends as `ferry put` can (PUT,
/// POST, a form); Tab completes paths. Real files in a folder of the test's own.
@Suite struct PromptTests {
    let dir: String

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-prompts-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir + "/sub/deeper", withIntermediateDirectories: true)
        for name in ["report-2024.pdf", "report-2025.pdf", "notes.txt", ".hidden"] {
            #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: Data("x".utf8)))
        }
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }

    func press(_ keys: [Key], _ start: AppState? = nil) -> (AppState, [Command]) {
        Fixtures.press(keys, from: start ?? AppState(downloadDirectory: "/home/me/Downloads", width: 80, height: 14, workingDirectory: dir),
                       on: Fixtures.queue())
    }

    func type(_ text: String) -> [Key] { text.map { .character($0) } }

    @Test func theDownloadPromptShowsItsFolderAndTabChangesIt() {
        defer { cleanup() }
        let (asking, _) = press([.character("a")] + type("http://h/f.bin"))
        #expect(asking.prompt?.label(folder: "~/Downloads") == "Download URL (into ~/Downloads; Tab: another folder): ")
        #expect(Fixtures.render(asking).text.hasSuffix("Download URL (into /home/me/Downloads; Tab: another folder): http://h/f.bin"))
        // Tab: the folder, to edit (Tab completes it, directories only); Enter goes back to the URL typed.
        let (folder, _) = press([.character("a")] + type("http://h/f.bin") + [.tab])
        #expect(folder.prompt?.kind == .downloadFolder(url: "http://h/f.bin") && folder.prompt?.editor.text == "/home/me/Downloads/")
        let (completed, _) = press([.character("a"), .tab, .control("u")] + type("su") + [.tab])
        #expect(completed.prompt?.editor.text == "sub/")
        let (back, _) = press([.character("a")] + type("http://h/f.bin") + [.tab, .control("u")] + type("sub/new") + [.enter])
        #expect(back.prompt?.kind == .downloadURL && back.prompt?.editor.text == "http://h/f.bin" && back.downloadDirectory == dir + "/sub/new")
        #expect(FileManager.default.fileExists(atPath: dir + "/sub/new"), "made when missing, as -o does")
        let (_, added) = press([.character("a")] + type("http://h/f.bin") + [.tab, .control("u")] + type("sub") + [.enter, .enter])
        #expect(added == [.add([TransferSpec(download: URL(string: "http://h/f.bin")!, directory: dir + "/sub")])])
        // A file is no folder: said, and the prompt stays; Esc goes back to the URL.
        let (refused, _) = press([.character("a"), .tab, .control("u")] + type("notes.txt") + [.enter])
        #expect(refused.prompt?.error == "not a directory: \(dir)/notes.txt")
        #expect(press([.character("a")] + type("http://x/") + [.tab, .escape]).0.prompt == .init(kind: .downloadURL, editor: LineEditor("http://x/")))
    }

    @Test func anUploadIsSentAsPutPostOrAForm() throws {
        defer { cleanup() }
        func upload(tabs: Int) -> (AppState, UploadSpec?) {
            let (state, commands) = press([.character("u")] + type("notes.txt") + [.enter] + Array(repeating: .tab, count: tabs)
                                          + type("https://example.com/up") + [.enter])
            guard case let .add(specs) = commands.first else { return (state, nil) }
            return (state, specs.first?.upload)
        }
        let (asked, _) = press([.character("u")] + type("notes.txt") + [.enter])
        #expect(asked.prompt?.label(folder: "") == "Upload to URL (PUT; Tab: POST): ")
        #expect(press([.character("u")] + type("notes.txt") + [.enter, .tab, .tab]).0.prompt?.label(folder: "") == "Upload to URL (POST form; Tab: PUT): ")
        let path = dir + "/notes.txt"
        // A raw file's upload offers the IETF resumable-upload protocol, as `ferry put` does; a form does not.
        #expect(upload(tabs: 0).1 == UploadSpec(method: "PUT", body: .raw(.file(path: path), contentType: "text/plain"), resumable: .ietf))
        #expect(upload(tabs: 1).1 == UploadSpec(method: "POST", body: .raw(.file(path: path), contentType: "text/plain"), resumable: .ietf))
        #expect(upload(tabs: 2).1 == UploadSpec(method: "POST", body: .multipart([.file(name: "file", source: .file(path: path), fileName: "notes.txt",
                                                                                            contentType: "text/plain")])))
        #expect(upload(tabs: 3).1?.method == "PUT")
        #expect(upload(tabs: 2).0.message?.text == "added upload (POST form) to https://example.com/up")
    }

    @Test func tabCompletesPaths() {
        defer { cleanup() }
        func tab(_ text: String, folders: Bool = false) -> PathCompletion.Result {
            PathCompletion.complete(text, cwd: dir, directoriesOnly: folders, home: dir + "/sub")
        }
        #expect(tab("no") == .init(text: "notes.txt", candidates: []))
        #expect(tab("rep") == .init(text: "report-202", candidates: ["report-2024.pdf", "report-2025.pdf"]))
        #expect(tab("s") == .init(text: "sub/", candidates: []))
        #expect(tab("sub/d") == .init(text: "sub/deeper/", candidates: []))
        #expect(tab(dir + "/n").text == dir + "/notes.txt")
        #expect(tab("~/d").text == "~/deeper/")
        #expect(tab("").candidates == ["notes.txt", "report-2024.pdf", "report-2025.pdf", "sub/"], "hidden entries only for a dot")
        #expect(tab(".h").text == ".hidden")
        #expect(tab("", folders: true) == .init(text: "sub/", candidates: []))
        #expect(tab("zzz") == .init(text: "zzz", candidates: []))
        // In the prompt: what it could be, above it.
        let (state, _) = press([.character("u")] + type("rep") + [.tab])
        #expect(state.prompt?.editor.text == "report-202" && state.prompt?.hint == "2 matches: report-2024.pdf  report-2025.pdf")
        #expect(Fixtures.render(state).text.contains("2 matches: report-2024.pdf  report-2025.pdf\nUpload file (Tab completes): report-202"))
        let (uploading, _) = press([.character("u")] + type("rep") + [.tab] + type("5") + [.tab, .enter])
        #expect(uploading.prompt?.kind == .uploadURL(path: dir + "/report-2025.pdf", shape: .put))
    }

    /// Issue 40: the reducer never touches the disk: Tab, a folder and a file to upload are questions (Commands)
    /// whose answers come back (FileAnswer); an answer that comes after the prompt moved on changes nothing.
    @Test func thePromptsAskTheFileSystemAndTakeItsAnswers() {
        defer { cleanup() }
        let start = AppState(downloadDirectory: "/home/me/Downloads", width: 80, height: 14, workingDirectory: "/nowhere")
        var state = start
        for key in [Key.character("u")] + type("rep") { state = reduce(state, key, Fixtures.queue()).0 }
        let (asked, commands) = reduce(state, .tab, Fixtures.queue())
        #expect(commands == [.completePath("rep", directoriesOnly: false)] && asked.prompt?.editor.text == "rep")
        let answer = FileAnswer.completed(text: "rep", .init(text: "report-202", candidates: ["report-2024.pdf", "report-2025.pdf"]))
        #expect(reduce(asked, answer: answer).prompt?.editor.text == "report-202")
        // Typed on meanwhile: the answer is for a text no longer there.
        let typedOn = reduce(asked, .character("x"), Fixtures.queue()).0
        #expect(reduce(typedOn, answer: answer).prompt?.editor.text == "repx")
        let (checking, check) = reduce(asked, .enter, Fixtures.queue())
        #expect(check == [.checkUploadFile("rep")] && checking.prompt?.kind == .uploadFile)
        #expect(reduce(checking, answer: .uploadFile(text: "rep", .refused("no such file: /nowhere/rep"))).prompt?.error == "no such file: /nowhere/rep")
        #expect(reduce(checking, answer: .uploadFile(text: "rep", .path("/nowhere/rep"))).prompt?.kind == .uploadURL(path: "/nowhere/rep", shape: .put))
        // Closed before the answer came: nothing reopens.
        let closed = reduce(checking, .escape, Fixtures.queue()).0
        #expect(reduce(closed, answer: .uploadFile(text: "rep", .path("/nowhere/rep"))).prompt == nil)
    }
}
