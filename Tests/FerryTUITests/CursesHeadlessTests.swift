import CNcurses
import Foundation
import Testing
import TestHTTPServer
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI
#if canImport(Glibc)
import Glibc
#endif

/// Real ncurses with no tty: `newterm` on a temporary file. ncurses state is process-global, hence serialized.
@Suite(.serialized) struct CursesHeadlessTests {
    @MainActor
    @Test func blitIsLosslessAndAnUnchangedFrameWritesNothing() throws {
        _ = setlocale(LC_ALL, "C.UTF-8")  // swift test runs in the C locale; ncursesw needs UTF-8 to write it
        defer { _ = setlocale(LC_ALL, "C") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-curses-\(getpid()).out").path
        defer { unlink(path) }
        let output = try #require(fopen(path, "w+"))
        let input = try #require(fopen("/dev/null", "r"))
        defer { fclose(output); fclose(input) }
        // LINES is ignored on purpose: CursesTerminal unsets it; the file has no size, so 24x80. (Under the lock
        // that other tests start children with: a change of the environment while a child is spawned with it races the spawn.)
        let terminal = try ProcessEnvironment.lock.withLock {
            setenv("LINES", "30", 1)
            return try CursesTerminal(term: "xterm-256color", output: output, input: input, colorAllowed: true, guardFD: nil)
        }
        defer { terminal.close() }
        #expect(terminal.unicode)

        var queue = Fixtures.queue()
        queue.items[0] = Fixtures.item(1, "数据 ü \u{1B}[2J.iso", .running, done: 300, total: 628, rate: 1, eta: 3)
        var state = Fixtures.state(width: terminal.width, height: terminal.height)
        state.selectedID = TransferID(3)
        let canvas = Screen.render(state, queue, RenderContext(unicode: true, now: Fixtures.now))
        terminal.draw(canvas)
        fflush(output)

        // Lossless: every cell reads back as drawn, with its bold/reverse attributes.
        for y in 0..<canvas.height {
            for x in 0..<canvas.width where !canvas[x, y].isContinuation {
                let cell = canvas[x, y]
                let back = terminal.cellOnScreen(x: x, y: y)
                #expect(back.text == String(cell.character), "cell \(x),\(y)")
                #expect((back.attributes & CursesTerminal.reverseAttribute != 0) == cell.style.reverse, "reverse at \(x),\(y)")
                #expect((back.attributes & CursesTerminal.boldAttribute != 0) == cell.style.bold, "bold at \(x),\(y)")
            }
        }

        let first = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        terminal.draw(canvas)
        fflush(output)
        let second = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        #expect(first > 0)
        #expect(second - first == 0, "an unchanged frame wrote \(second - first) bytes")

        // One row's rate digits changing costs a few bytes, not a repaint.
        queue.items[0].bytesDone = 301
        terminal.draw(Screen.render(state, queue, RenderContext(unicode: true, now: Fixtures.now)))
        fflush(output)
        let third = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        print("BENCH curses bytes: first frame \(first), unchanged frame \(second - first), one number changed \(third - second)")
        #expect(third - second < 200)
    }

    /// The terminal is asked to mark pastes (bracketed paste) and stops on close; what it marks comes as one
    /// `.paste`, line breaks and all, and the keys after it as keys.
    @MainActor
    @Test func aBracketedPasteIsOneEventNotKeys() throws {
        _ = setlocale(LC_ALL, "C.UTF-8")
        defer { _ = setlocale(LC_ALL, "C") }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-paste-\(getpid())").path
        defer { unlink(base + ".out"); unlink(base + ".in") }
        try Data("\u{1B}[200~http://h/1.bin\r\nhttp://h/2.bin\u{1B}[201~p".utf8).write(to: URL(fileURLWithPath: base + ".in"))
        let output = try #require(fopen(base + ".out", "w+"))
        let input = try #require(fopen(base + ".in", "r"))
        defer { fclose(output); fclose(input) }
        let terminal = try ProcessEnvironment.lock.withLock {
            try CursesTerminal(term: "xterm-256color", output: output, input: input, colorAllowed: false, guardFD: nil)
        }
        var events: [TerminalEvent] = []
        while let event = terminal.readEvent() { events.append(event) }
        terminal.close()
        fflush(output)
        #expect(events == [.key(.paste("http://h/1.bin\r\nhttp://h/2.bin")), .key(.character("p"))])
        let written = String(decoding: FileManager.default.contents(atPath: base + ".out") ?? Data(), as: UTF8.self)
        let on = try #require(written.range(of: "\u{1B}[?2004h"), "bracketed paste asked for")
        let off = try #require(written.range(of: "\u{1B}[?2004l", options: .backwards), "and turned off on close")
        #expect(on.upperBound <= off.lowerBound)
    }

    /// A paste whose end marker came apart on the way (a slow link: curses gives the ESC alone after its escape
    /// delay, then the rest as characters), or never came, still ends: the keys after it are keys, not text
    /// of a paste that swallows everything (q and Esc included). The gaps are what a slow link makes; longer
    /// ones only make the same case.
    @MainActor
    @Test func aPasteWhoseEndCameApartOrNeverCameStillEnds() throws {
        _ = setlocale(LC_ALL, "C.UTF-8")
        defer { _ = setlocale(LC_ALL, "C") }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-paste2-\(getpid()).out").path
        defer { unlink(path) }
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let output = try #require(fopen(path, "w+"))
        let input = try #require(fdopen(fds[0], "r"))
        defer { fclose(output); fclose(input); close(fds[1]) }
        let terminal = try ProcessEnvironment.lock.withLock {
            try CursesTerminal(term: "xterm-256color", output: output, input: input, colorAllowed: false, guardFD: nil)
        }
        defer { terminal.close() }
        terminal.pasteSilence = 400_000_000  // 2 s in use
        func send(_ text: String) { _ = text.utf8CString.withUnsafeBufferPointer { write(fds[1], $0.baseAddress, $0.count - 1) } }
        func events(after seconds: Double) -> [TerminalEvent] {
            usleep(useconds_t(seconds * 1_000_000))
            var out: [TerminalEvent] = []
            while let event = terminal.readEvent() { out.append(event) }
            return out
        }
        send("\u{1B}[200~abc\u{1B}")
        #expect(events(after: 0.2) == [])
        send("[201~p")
        #expect(events(after: 0.1) == [.key(.paste("abc")), .key(.character("p"))])
        send("\u{1B}[200~lost end")
        #expect(events(after: 0.1) == [])
        let taken = terminal.inputTaken
        send("q")
        #expect(events(after: 0.7) == [.key(.paste("lost end")), .key(.character("q"))])
        #expect(terminal.inputTaken > taken)
    }

    @MainActor
    @Test func dumbTerminalIsRefusedWithAPointerToNoTUI() {
        #expect(throws: TerminalOpenError.self) { try TerminalApp.checkTerminal("dumb") }
        #expect(throws: TerminalOpenError.self) { try TerminalApp.checkTerminal(nil) }
        #expect(TerminalOpenError.dumb("dumb").description.contains("--no-tui"))
        #expect(TerminalOpenError.unusable("xterm-kitty").description.contains("--no-tui"))
    }
}

/// `[ui] bell`: the rule for when it rings, and the byte real ncurses sends for it.
@Suite(.serialized) struct QueueBellTests {
    func snapshot(_ counts: [TransferState: Int]) -> QueueSnapshot {
        var totals = QueueTotals()
        totals.count = counts
        return QueueSnapshot(version: 1, items: [], totals: totals, maxConcurrent: 4, maxPerHost: 4)
    }

    @Test func ringsOnceWhenTheQueueEmpties() {
        var bell = QueueBell()
        var ring = false
        ring = bell.rings(for: snapshot([.completed: 2]))
        #expect(!ring, "opening on a finished queue is no news")
        ring = bell.rings(for: snapshot([.running: 1, .queued: 2]))
        #expect(!ring)
        ring = bell.rings(for: snapshot([.running: 1, .completed: 2]))
        #expect(!ring)
        ring = bell.rings(for: snapshot([.waiting: 1, .completed: 2]))
        #expect(!ring, "a retry to come is work left")
        ring = bell.rings(for: snapshot([.completed: 2, .failed: 1]))
        #expect(ring)
        ring = bell.rings(for: snapshot([.completed: 2, .failed: 1]))
        #expect(!ring, "once")
        ring = bell.rings(for: snapshot([.queued: 1, .completed: 3]))
        #expect(!ring)
        ring = bell.rings(for: snapshot([.paused: 1, .completed: 3]))
        #expect(ring, "a pause of the last item empties it too")
    }

    @MainActor
    @Test func theBellReachesTheTerminal() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-bell-\(getpid()).out").path
        defer { unlink(path) }
        let output = try #require(fopen(path, "w+"))
        let input = try #require(fopen("/dev/null", "r"))
        defer { fclose(output); fclose(input) }
        let terminal = try ProcessEnvironment.lock.withLock {
            try CursesTerminal(term: "xterm-256color", output: output, input: input, colorAllowed: false, guardFD: nil)
        }
        defer { terminal.close() }
        fflush(output)
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        terminal.bell()
        fflush(output)
        let after = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(after.dropFirst(before.count).contains(0x07))
    }
}
