import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The UI's run loop on the main queue (which `dispatchMain`, or Swift's async main, drains): a read source on
/// stdin, a SIGWINCH source, a timer, an engine wake-up (`TerminalWakeup`) and signal sources.
/// A frame is rendered only when the snapshot's version changed, a key arrived, the size changed or a shown
/// countdown ticked; it is blitted only when it differs from the last one. The timer runs only while something
/// can change on screen by itself (see `Pace`): idle, nothing wakes the process until a key, a resize or an
/// engine event, so it writes nothing and uses no CPU.
@MainActor
public final class TerminalApp {
    public struct Options: Sendable {
        public var downloadDirectory: String
        /// false when NO_COLOR is set.
        public var colorAllowed: Bool
        public var term: String?
        /// nil: Unicode bars when the locale is UTF-8; true/false forces ASCII or Unicode (`[ui] ascii`).
        public var forceASCII: Bool?
        /// At most this many frames a second (`[ui] refresh_hz`).
        public var framesPerSecond: Int
        /// The netrc file of items added with `a` and `u` (the command line's default one); nil: none.
        public var netrcFile: String?
        /// The ssh-agent of sftp and scp items added with `a` and `u` (this session's `SSH_AUTH_SOCK`).
        public var sshAgent: String?
        /// Ring the terminal's bell when the queue empties (`[ui] bell`).
        public var bell: Bool

        public init(downloadDirectory: String, colorAllowed: Bool, term: String?, forceASCII: Bool? = nil,
                    framesPerSecond: Int = 10, netrcFile: String? = nil, sshAgent: String? = nil, bell: Bool = false) {
            self.downloadDirectory = downloadDirectory
            self.netrcFile = netrcFile
            self.sshAgent = sshAgent
            self.bell = bell
            self.colorAllowed = colorAllowed
            self.term = term
            self.forceASCII = forceASCII
            self.framesPerSecond = max(1, min(60, framesPerSecond))
        }
    }

    private let queue: any QueueControl
    private let terminal: CursesTerminal
    private let options: Options
    /// Unicode bars and glyphs, or ASCII (the locale, unless the config forces one).
    private let unicode: Bool
    private var state: AppState
    private var bell = QueueBell()
    private var sources: [any DispatchSourceProtocol] = []
    private let wakeup: TerminalWakeup?
    /// The engine answered a command since the last frame (its message is new).
    private var answered = false
    /// Commands sent for an answer so far: only the last one's answer is said (the same key pressed twice).
    private var asked = 0
    private let timer = DispatchSource.makeTimerSource(queue: .main)
    /// What the timer is armed for now.
    private var pace = Pace.off
    /// When the last pump ran (keeps wake-ups under the frame cap).
    private var lastPump = DispatchTime(uptimeNanoseconds: 0)
    /// What the last frame showed of the engine's queue: its version, and which window (a new window of the same
    /// queue has the same version).
    private var lastVersion: QueueSnapshot.Shown?
    /// The window last asked of the engine (nil: none yet, or the engine in this process).
    private var askedView: QueueView?
    private var lastSecond = 0
    private var lastCanvas: Canvas?
    private var emptyReads = 0
    /// Frames blitted, for the curious (FERRY_TUI_STATS).
    private var frames = 0

    /// Checks the terminal type before anything else happens (so `ferry get` with TERM=dumb queues nothing).
    nonisolated public static func checkTerminal(_ term: String?) throws(TerminalOpenError) {
        guard let term, !term.isEmpty, term != "dumb" else { throw .dumb(term ?? "") }
    }

    /// Opens the terminal and starts the loop; returns at once. The app ends the process itself
    /// (quit, SIGINT, SIGTERM, SIGHUP), after restoring the terminal and stopping the transfers.
    /// - Parameter wakeup: nudged when the queue changes; without it an idle UI would not notice engine changes
    ///   (an item handed over by another ferry, a retry timer firing) until the next key.
    @discardableResult
    public static func launch(queue: any QueueControl, options: Options, select: TransferID? = nil,
                              wakeup: TerminalWakeup? = nil) throws(TerminalOpenError) -> TerminalApp {
        // Ours before curses opens: ncurses then leaves SIGINT/SIGTERM alone (it only takes default dispositions).
        // SIGTSTP (Ctrl-Z) too: curses' own handler would leave bracketed paste on in the shell.
        for sig in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGTSTP] { signal(sig, SIG_IGN) }
        guard let output = fdopen(STDOUT_FILENO, "w"), let input = fdopen(STDIN_FILENO, "r") else {
            throw .unusable(options.term ?? "")
        }
        let terminal = try CursesTerminal(term: options.term, output: output, input: input,
                                          colorAllowed: options.colorAllowed, guardFD: STDOUT_FILENO)
        let app = TerminalApp(queue: queue, terminal: terminal, options: options, wakeup: wakeup)
        app.state.selectedID = select
        app.start()
        return app
    }

    init(queue: any QueueControl, terminal: CursesTerminal, options: Options, wakeup: TerminalWakeup? = nil) {
        self.queue = queue
        self.terminal = terminal
        self.options = options
        self.wakeup = wakeup
        unicode = options.forceASCII.map { !$0 } ?? terminal.unicode
        state = AppState(downloadDirectory: options.downloadDirectory, width: terminal.width, height: terminal.height)
        state.netrcFile = options.netrcFile
        state.sshAgent = options.sshAgent
    }

    private func start() {
        let input = DispatchSource.makeReadSource(fileDescriptor: STDIN_FILENO, queue: .main)
        input.setEventHandler { MainActor.assumeIsolated { self.pump(inputReady: true) } }
        timer.schedule(deadline: .distantFuture)  // armed by the first pump, as needed
        timer.setEventHandler { MainActor.assumeIsolated { self.pump(inputReady: false) } }
        // Created after curses opened, this replaces ncurses' own SIGWINCH handler (libdispatch installs one that
        // routes the signal to a signalfd), so the new size is read here rather than by the next wget_wch.
        let resize = DispatchSource.makeSignalSource(signal: SIGWINCH, queue: .main)
        resize.setEventHandler {
            MainActor.assumeIsolated {
                self.terminal.updateSize()
                self.wake()
            }
        }
        let suspend = DispatchSource.makeSignalSource(signal: SIGTSTP, queue: .main)
        suspend.setEventHandler {
            MainActor.assumeIsolated {
                self.terminal.suspend()
                // Continued: the shell wrote over the screen, so the same frame is drawn again, whole.
                self.lastCanvas = nil
                self.pump(inputReady: false)
            }
        }
        sources = [input as any DispatchSourceProtocol, timer as any DispatchSourceProtocol, resize as any DispatchSourceProtocol,
                   suspend as any DispatchSourceProtocol]
        let stops: [(Int32, Int32)] = [(SIGINT, 130), (SIGTERM, 143), (SIGHUP, 129)]
        for (sig, code) in stops {
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .main)
            let reason: String? = sig == SIGHUP ? nil : "interrupted"
            source.setEventHandler {
                MainActor.assumeIsolated { () -> Void in
                    // Ctrl-C while the UI asks something (a prompt, a question) leaves the asking, as Esc does,
                    // not the UI (it detached the whole UI from a mistyped URL).
                    if sig == SIGINT, self.state.isAsking {
                        self.state = reduce(self.state, .escape, self.queue.snapshot()).0
                        self.lastCanvas = nil
                        self.pump(inputReady: false)
                        return
                    }
                    self.finish(code, reason: reason)
                }
            }
            sources.append(source)
        }
        sources.forEach { $0.resume() }
        wakeup?.handler = { [unowned self] in self.wake() }
        pump(inputReady: false)
    }

    private var framePeriod: DispatchTimeInterval { .milliseconds(1000 / options.framesPerSecond) }

    /// Something may have changed (an engine event, a resize): draw now, or as soon as the frame cap allows.
    private func wake() {
        guard pace != .frames else { return }  // the next frame comes soon anyway
        let earliest = lastPump + framePeriod
        if DispatchTime.now() >= earliest {
            pump(inputReady: false)
        } else {
            timer.schedule(deadline: earliest, leeway: .milliseconds(5))
            pace = .once
        }
    }

    /// Arms the timer for what the screen shows now: frames while a transfer moves, one tick at the next whole
    /// second while only a countdown or an "ago" can change, nothing when idle.
    private func arm(for snapshot: QueueSnapshot) {
        let wanted = Pace.wanted(snapshot, state)
        switch wanted {
        case .frames where pace != .frames:
            timer.schedule(deadline: .now() + framePeriod, repeating: framePeriod, leeway: .milliseconds(20))
        case .frames:
            return  // already repeating
        case .once:
            let now = Date().timeIntervalSince1970
            let untilNextSecond = now.rounded(.down) + 1 - now
            timer.schedule(wallDeadline: .now() + untilNextSecond + 0.005, leeway: .milliseconds(20))
        case .off where pace != .off:
            timer.schedule(deadline: .distantFuture)
        case .off:
            return
        }
        pace = wanted
    }

    /// An engine behind its socket sends a window of the list: ask for another when the screenful at the
    /// selection is not in the one asked for (scrolled, filtered, another view). A selection made where no
    /// row was held learns its item once the row comes.
    private func followWindow(_ snapshot: QueueSnapshot, _ rows: ListRows) {
        guard let window = snapshot.window else {
            // The engine in this process: the whole view is here, the selected item in it or not.
            if let selectedID = state.selectedID, rows[state.selectedIndex]?.id != selectedID, rows.index(of: selectedID) == nil {
                state.selectShownRow(rows)
            }
            return
        }
        // A view that changed under the selection (a filter typed or cleared): the engine said where the selected
        // item is in it (an answer about that item, not an older one). There, the selection stays on it (the
        // window to show it is asked for below); not in it, the row shown in its place is the selection.
        if let selectedID = state.selectedID, window.answers(state.queueView), window.around == selectedID.rawValue,
           rows.index(of: selectedID) == nil {
            if let row = window.aroundRow { state.selectedIndex = row } else { state.selectShownRow(rows) }
        }
        if state.selectedID == nil, let index = state.selectionIndex(in: rows), let item = rows[index] {
            state.selectedIndex = index
            state.selectedID = item.id
            if state.openWhenHeld, state.screen == .list { state.open(item) }
        }
        if state.selectedID != nil { state.openWhenHeld = false }
        // The window is for the terminal's size now (the state takes it when the frame is drawn, which is how
        // a resize is noticed).
        var sized = state
        sized.width = terminal.width
        sized.height = terminal.height
        if let askedView, sized.windowCovers(askedView, rows) { return }
        let wanted = sized.wantedView(rows)
        guard wanted != askedView else { return }
        askedView = wanted
        queue.setView(wanted)
    }

    /// Reads every waiting key, runs it through the reducer, and draws a frame if anything visible changed.
    private func pump(inputReady: Bool) {
        lastPump = DispatchTime.now()
        var snapshot = queue.snapshot()
        defer { arm(for: snapshot) }
        // An answer to a command came (`say`): its message is drawn.
        var changed = answered
        answered = false
        // Before any key: the selection goes to what is active once the first rows have come.
        if !state.opened {
            state.openOnActive(snapshot)
            changed = changed || state.opened
        }
        // Input a paste took (its bytes come before its one event) is input, not a terminal that went away.
        let takenBefore = terminal.inputTaken
        while let event = terminal.readEvent() {
            changed = true
            switch event {
            case .resize:
                break
            case let .key(key):
                // A key before the first rows: the user leads; the selection is not moved for them later.
                state.opened = true
                state.width = terminal.width
                state.height = terminal.height
                let (next, commands) = reduce(state, key, snapshot)
                state = next
                if !commands.isEmpty {
                    execute(commands)
                    snapshot = queue.snapshot()
                }
            }
        }
        if inputReady {
            // A readable stdin that yields no key, again and again, is a terminal that went away.
            emptyReads = changed || terminal.inputTaken != takenBefore ? 0 : emptyReads + 1
            if emptyReads > 100 { finish(129, reason: nil) }
        }
        // The list's rows, once a pump: the view's window or the whole view filtered here (they follow the view
        // and the snapshot, not the selection, which followWindow may move).
        let rows = state.rows(snapshot)
        followWindow(snapshot, rows)
        if options.bell, bell.rings(for: snapshot) { terminal.bell() }
        let now = Date()
        let second = Int(now.timeIntervalSince1970)
        let ticking = Pace.wanted(snapshot, state) != .off
        guard changed || lastCanvas == nil || snapshot.shown != lastVersion || (ticking && second != lastSecond)
              || state.width != terminal.width || state.height != terminal.height else { return }
        lastVersion = snapshot.shown
        lastSecond = second
        state.sampleRate(snapshot, second: second)
        state.width = terminal.width
        state.height = terminal.height
        let first = state.firstRow(rows)
        // A screenful whose window is on its way is not drawn blank: the screen stays as it was until its rows
        // come (a jump with g or G sent a frame that erased every row, then one that drew them).
        if lastCanvas != nil, state.screen == .list, !TransferList.rowsHeld(rows, first: first, rows: state.listHeight) { return }
        let canvas = Screen.render(state, snapshot, RenderContext(unicode: unicode, now: now), rows: rows)
        state.listTop = first
        guard canvas != lastCanvas else { return }
        terminal.draw(canvas)
        lastCanvas = canvas
        frames += 1
    }

    private func execute(_ commands: [Command]) {
        for command in commands {
            switch command {
            case let .queue(command): queue.send(command)
            case let .queueSaying(command):
                asked += 1
                let question = (number: asked, message: state.message)
                queue.send(command) { result in
                    DispatchQueue.main.async { MainActor.assumeIsolated { self.say(result, to: command, asked: question) } }
                }
            case .completePath, .checkFolder, .checkUploadFile:
                // Off the main thread (a slow directory must not freeze the screen); the answer goes to the reducer.
                let cwd = state.workingDirectory
                DispatchQueue.global(qos: .userInitiated).async {
                    guard let answer = FileEffects.perform(command, cwd: cwd) else { return }
                    DispatchQueue.main.async {
                        MainActor.assumeIsolated {
                            self.state = reduce(self.state, answer: answer)
                            self.answered = true
                            self.wake()
                        }
                    }
                }
            case let .add(specs):
                // An upload's file is checked again: it may have gone while its URL was typed.
                if let refusal = specs.lazy.compactMap(FileEffects.unreadableUpload).first {
                    state.message = .init(text: refusal, isError: true)
                    continue
                }
                // The screen goes on while the engine takes it; its answer selects the new item.
                queue.enqueue(specs) { ids in
                    DispatchQueue.main.async { MainActor.assumeIsolated { self.added(ids) } }
                }
            case .quit: finish(0, reason: nil)
            case .stopEngine: finish(0, reason: nil, stopEngine: true)
            }
        }
    }

    /// The engine took an add (its new ids), or did not (nil): the new item is selected.
    private func added(_ ids: [TransferID]?) {
        defer {
            answered = true
            wake()
        }
        guard let id = ids?.last else {
            state.message = .init(text: "the engine did not take the item", isError: true)
            return
        }
        state.selectedID = id
        // A new item is the last: the list goes there (its row comes with the window the app asks for).
        state.selectedIndex = Int.max / 2
        if !state.view.includes(.queued) && !state.view.includes(.running) { state.view = .all }
    }

    /// The engine's answer to a command on many items, in the words a shell verb prints ("nothing paused; #1-#3
    /// are done, left as they are"), in place of the note the key left, unless a newer message stands.
    private func say(_ result: CommandResult?, to command: QueueCommand, asked question: (number: Int, message: AppState.Message?)) {
        guard question.number == asked, state.message == question.message else { return }
        state.message = result.map { .init(text: $0.outcome.sentence(for: command), isError: false) }
            ?? .init(text: "the engine did not carry it out", isError: true)
        answered = true
        wake()
    }

    /// The engine went away (its connection closed): the UI says so and ends, never hangs. `asked`: this UI
    /// had asked it to stop.
    public func engineGone(reason: String, asked: Bool) {
        guard !asked else { return }
        finish(1, reason: nil, message: "the engine went away (\(reason)); run ferry again to start a new one")
    }

    /// Restores the terminal first (fast, so an SSH user gets a shell back), then detaches: the transfers go on
    /// in the engine. With `stopEngine` the engine stops them (their `.part` files are kept) and exits.
    private func finish(_ code: Int32, reason: String?, stopEngine: Bool = false, message: String? = nil) -> Never {
        sources.forEach { $0.cancel() }
        terminal.close()
        let snapshot = queue.snapshot()
        let count = snapshot.counts
        let running = count[.running, default: 0] + count[.waiting, default: 0]
        var line = message
        if stopEngine {
            queue.stopEngine()
            line = "stopped the engine" + (running > 0 ? " and \(running) transfer\(running == 1 ? "" : "s"); partial files are kept" : "")
        } else {
            queue.detach()
            if line == nil, running > 0, code != 129 {
                line = "\(reason.map { "\($0): " } ?? "")detached; \(running) transfer\(running == 1 ? " goes" : "s go") on (`ferry` shows them, `ferry stop` stops them)"
            }
        }
        if let line { try? FileHandle.standardError.write(contentsOf: Data("ferry: \(line)\n".utf8)) }
        if ProcessInfo.processInfo.environment["FERRY_TUI_STATS"] != nil {
            try? FileHandle.standardError.write(contentsOf: Data("ferry: \(frames) frames drawn\n".utf8))
        }
        exit(code)
    }
}

/// How often the run loop's timer fires.
enum Pace: Equatable {
    /// Nothing on screen changes without a key, a resize or an engine event: no timer.
    case off
    /// A transfer runs (bars, rates, ETAs move, and progress raises no engine event): `framesPerSecond`.
    case frames
    /// Only the clock moves what is shown (a retry countdown, the detail's "ago"): once, at the next whole second.
    case once

    static func wanted(_ snapshot: QueueSnapshot, _ state: AppState) -> Pace {
        if (snapshot.totals.count[.running] ?? 0) > 0 { return .frames }
        if (snapshot.totals.count[.waiting] ?? 0) > 0 { return .once }
        if case .detail = state.screen { return .once }
        return .off
    }
}
