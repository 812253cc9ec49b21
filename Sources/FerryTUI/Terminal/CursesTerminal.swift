import CCrashGuard
import CNcurses
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why the terminal UI cannot start; the message points at the headless mode.
public enum TerminalOpenError: Error, CustomStringConvertible, Sendable {
    case dumb(String)
    case unusable(String)

    public var description: String {
        switch self {
        case let .dumb(term):
            return "the terminal (TERM=\(term.isEmpty ? "unset" : term)) cannot position the cursor, so the UI cannot run; use --no-tui"
        case let .unusable(term):
            return "cannot open the terminal UI on TERM=\(term) (no terminfo entry works); use --no-tui"
        }
    }
}

/// What curses reported.
public enum TerminalEvent: Sendable, Equatable {
    case key(Key)
    case resize
}

/// The only code that calls ncurses. Main-actor isolated, so the compiler keeps every curses call on one thread.
/// It blits a `Canvas` (werase + the cells + wnoutrefresh/doupdate: curses diffs against what is on screen, so an
/// unchanged frame writes nothing) and reads keys with `wget_wch`.
@MainActor
public final class CursesTerminal {
    private let screen: OpaquePointer
    /// Whether the locale is UTF-8; when not, the UI draws ASCII only.
    public let unicode: Bool
    /// Whether colours are used (the terminal has them and NO_COLOR is not set).
    public let color: Bool
    /// The terminfo entry that opened (may be a fallback for an unknown $TERM).
    public let terminalName: String
    private var pairs: [UInt16: Int16] = [:]
    /// Where the size is read from on SIGWINCH.
    private let outputFD: Int32
    private var repaintAll = false
    private var isOpen = true
    private let output: UnsafeMutablePointer<FILE>
    /// The bracketed paste being read (nil: none under way): a paste comes as one `.paste`.
    private var paste: Paste?
    /// Events decided but not returned yet (a paste that ended as a key came: the paste, then the key).
    private var pending: [TerminalEvent] = []
    /// Reads that took something from the terminal (a key, a byte of a paste): a read that takes nothing, again
    /// and again, is a terminal that went away, while one that feeds a paste is not.
    public private(set) var inputTaken = 0
    /// What the terminal sends around pasted text once asked to (`ESC [ ? 2004 h`, bracketed paste: xterm,
    /// tmux, screen, every common terminal emulator); curses returns these codes for them (`define_key`).
    /// Without it a paste arrives as keys: a line break in it is Enter, and a `p` or `c` in a URL pauses or
    /// cancels the selected item.
    private static let pasteStart = KEY_MAX + 1
    private static let pasteEnd = KEY_MAX + 2
    /// A paste longer than this keeps its first part (a list of thousands of URLs fits).
    nonisolated static let pasteLimit = 1 << 20
    /// The end marker as characters: what reaches ferry when it came apart on the way (a slow link split it after
    /// ESC, and curses gave the ESC and the rest one by one, past its escape delay).
    nonisolated fileprivate static let pasteEndText = "\u{1B}[201~"
    /// A paste whose end marker never came ends when a byte comes after this long a pause (nanoseconds): the
    /// paste, then that byte as a key, so that a lost marker cannot swallow every key after it. Long enough
    /// that a paste stalled on a slow link is not cut in two (the rest of it would be read as keys).
    var pasteSilence: UInt64 = 2_000_000_000

    /// Opens curses on `output`/`input` (see docs/platform.md for the choices).
    /// - Parameters:
    ///   - term: the terminal type; nil or "dumb" is refused. An unknown one falls back to xterm-256color, then vt100.
    ///   - guardFD: the tty whose termios the crash guard restores (nil: no crash guard, e.g. headless tests).
    public init(term: String?, output: UnsafeMutablePointer<FILE>, input: UnsafeMutablePointer<FILE>,
                colorAllowed: Bool, guardFD: Int32?) throws(TerminalOpenError) {
        let requested = term ?? ""
        guard !requested.isEmpty, requested != "dumb" else { throw .dumb(requested) }
        // Exported LINES/COLUMNS would pin the size even across resizes.
        unsetenv("LINES")
        unsetenv("COLUMNS")
        if let guardFD { _ = ferry_crash_guard_save(guardFD) }
        var opened: OpaquePointer?
        var name = requested
        for candidate in [requested, "xterm-256color", "vt100"] {
            opened = newterm(candidate, output, input)
            if opened != nil { name = candidate; break }
        }
        guard let opened else { throw .unusable(requested) }
        screen = opened
        terminalName = name
        outputFD = fileno(output)
        self.output = output
        _ = set_term(opened)
        unicode = ferry_locale_is_utf8() != 0
        cbreak()
        noecho()
        nonl()
        let window = ferry_stdscr()
        keypad(window, true)
        nodelay(window, true)
        set_escdelay(25)
        _ = define_key("\u{1B}[200~", Self.pasteStart)
        _ = define_key("\u{1B}[201~", Self.pasteEnd)
        Self.write(Self.bracketedPasteOn, to: output)
        _ = curs_set(0)  // fails on vt100: harmless
        if colorAllowed, has_colors() {
            start_color()
            use_default_colors()
            color = true
        } else {
            color = false
        }
        if guardFD != nil {
            var reset = Array(Self.bracketedPasteOff.utf8)
            for capability in ["rmcup", "cnorm", "sgr0", "rmkx"] {
                if let s = ferry_tigetstr(capability) { reset += Array(String(cString: s).utf8) }
            }
            reset.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { ferry_crash_guard_install($0.baseAddress, $0.count) }
            }
        }
    }

    public var width: Int { Int(getmaxx(ferry_stdscr())) }
    public var height: Int { Int(getmaxy(ferry_stdscr())) }

    /// Takes the terminal's size from the tty and resizes curses' screens to it (after SIGWINCH, whose handler
    /// the run loop owns). The next `draw` repaints everything. Does nothing when the size did not change or
    /// the output is not a terminal.
    public func updateSize() {
        guard isOpen else { return }
        var size = winsize()
        guard ioctl(outputFD, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0, size.ws_col > 0 else { return }
        let (rows, columns) = (Int32(size.ws_row), Int32(size.ws_col))
        guard is_term_resized(rows, columns) else { return }
        _ = resizeterm(rows, columns)
        repaintAll = true
    }

    /// Draws `canvas`; curses sends only what differs from the screen.
    public func draw(_ canvas: Canvas) {
        guard isOpen else { return }
        let window = ferry_stdscr()
        werase(window)
        let rows = min(canvas.height, height)
        let columns = min(canvas.width, width)
        var cc = cchar_t()
        var chars = [wchar_t](repeating: 0, count: 8)
        for y in 0..<rows {
            for x in 0..<columns {
                let cell = canvas[x, y]
                if cell.isContinuation { continue }
                if cell.character == " ", cell.style == .plain { continue }  // werase left a plain blank
                if x + DisplayWidth.of(cell.character) > columns { continue }
                var count = 0
                for scalar in cell.character.unicodeScalars.prefix(5) {
                    chars[count] = wchar_t(bitPattern: scalar.value)
                    count += 1
                }
                chars[count] = 0
                let (attributes, pair) = attributes(for: cell.style)
                setcchar(&cc, chars, attributes, pair, nil)
                wmove(window, Int32(y), Int32(x))
                _ = wadd_wch(window, &cc)  // ERR in the bottom-right cell, yet it draws
            }
        }
        if repaintAll {
            clearok(window, true)
            repaintAll = false
        }
        wnoutrefresh(window)
        doupdate()
    }

    /// Rings the terminal's bell (or flashes it, where it has no bell).
    public func bell() {
        guard isOpen else { return }
        _ = beep()
    }

    /// The next key, or nil when none is waiting (never blocks). A paste comes whole, as one `.paste`, once
    /// its end has been read.
    public func readEvent() -> TerminalEvent? {
        guard isOpen else { return nil }
        if !pending.isEmpty { return pending.removeFirst() }
        while true {
            var value: wint_t = 0
            let result = wget_wch(ferry_stdscr(), &value)
            if result == ERR { return nil }
            inputTaken += 1
            let now = DispatchTime.now()
            let marker = result == KEY_CODE_YES && (Int32(value) == Self.pasteStart || Int32(value) == Self.pasteEnd)
            if let open = paste, !marker, now.uptimeNanoseconds - open.lastByte.uptimeNanoseconds > pasteSilence {
                // The end marker was lost: the paste ends here, and what came now is read as input again.
                paste = nil
                pending.append(.key(.paste(open.text)))
                if let event = decode(result, value) { pending.append(event) }
                return pending.removeFirst()
            }
            paste?.lastByte = now
            if result == KEY_CODE_YES {
                switch Int32(value) {
                case Self.pasteStart:
                    // A second start before an end: the first paste ends there.
                    if let open = paste { pending.append(.key(.paste(open.text))) }
                    paste = Paste(lastByte: now)
                    if !pending.isEmpty { return pending.removeFirst() }
                    continue
                case Self.pasteEnd:
                    guard let open = paste else { continue }
                    paste = nil
                    return .key(.paste(open.text))
                case KEY_RESIZE:
                    repaintAll = true
                    return .resize
                default:
                    // A key code inside a paste is curses' reading of pasted escape bytes: not text, dropped.
                    if paste == nil, let event = decode(result, value) { return event }
                    continue
                }
            }
            if paste != nil {
                guard let scalar = Unicode.Scalar(UInt32(value)) else { continue }
                if let text = paste!.take(scalar) {
                    paste = nil
                    return .key(.paste(text))
                }
                continue
            }
            if let event = decode(result, value) { return event }
        }
    }

    /// A bracketed paste being read: its text (the first `pasteLimit` scalars), its last scalars (where an end
    /// marker that came apart shows) and when its last byte came.
    private struct Paste {
        var text = ""
        var scalars = 0
        var tail = ""
        var lastByte: DispatchTime

        /// Takes a scalar of the paste; its text when the scalar completed an end marker read as characters.
        mutating func take(_ scalar: Unicode.Scalar) -> String? {
            if scalars < CursesTerminal.pasteLimit {
                text.unicodeScalars.append(scalar)
                scalars += 1
            }
            let marker = CursesTerminal.pasteEndText.unicodeScalars
            tail.unicodeScalars.append(scalar)
            if tail.unicodeScalars.count > marker.count { tail.unicodeScalars.removeFirst() }
            guard tail.unicodeScalars.elementsEqual(marker) else { return nil }
            if text.unicodeScalars.reversed().starts(with: marker.reversed()) { text.unicodeScalars.removeLast(marker.count) }
            return text
        }
    }

    /// A key curses read, as ferry's event; nil for one ferry does not use.
    private func decode(_ result: Int32, _ value: wint_t) -> TerminalEvent? {
        if result == KEY_CODE_YES {
            if Int32(value) == KEY_RESIZE {
                repaintAll = true
                return .resize
            }
            return Self.keys[Int32(value)].map { .key($0) }
        }
        switch value {
        case 10, 13: return .key(.enter)
        case 27: return .key(.escape)
        case 8, 127: return .key(.backspace)
        case 9: return .key(.tab)
        case 1...26: return .key(.control(Character(Unicode.Scalar(UInt8(value) + 96))))
        default: return Unicode.Scalar(UInt32(value)).map { .key(.character(Character($0))) }
        }
    }

    /// The curses key codes ferry uses.
    private static let keys: [Int32: Key] = [
        KEY_UP: .up, KEY_DOWN: .down, KEY_LEFT: .left, KEY_RIGHT: .right, KEY_PPAGE: .pageUp, KEY_NPAGE: .pageDown,
        KEY_HOME: .home, KEY_END: .end, KEY_ENTER: .enter, KEY_BACKSPACE: .backspace, KEY_DC: .delete,
    ]

    private static let bracketedPasteOn = "\u{1B}[?2004h"
    private static let bracketedPasteOff = "\u{1B}[?2004l"

    private static func write(_ text: String, to file: UnsafeMutablePointer<FILE>) {
        fputs(text, file)
        fflush(file)
    }

    /// What is on curses' virtual screen at (x, y): the character and its attributes (headless tests read the blit back).
    public func cellOnScreen(x: Int, y: Int) -> (text: String, attributes: attr_t) {
        var cc = cchar_t()
        wmove(ferry_stdscr(), Int32(y), Int32(x))
        win_wch(ferry_stdscr(), &cc)
        var chars = [wchar_t](repeating: 0, count: 8)
        var attributes: attr_t = 0
        var pair: Int16 = 0
        getcchar(&cc, &chars, &attributes, &pair, nil)
        let scalars = chars.prefix { $0 != 0 }.compactMap { Unicode.Scalar(UInt32(bitPattern: $0)) }
        return (String(String.UnicodeScalarView(scalars)), attributes)
    }

    public static var boldAttribute: attr_t { ferry_a_bold() }
    public static var reverseAttribute: attr_t { ferry_a_reverse() }

    /// Ctrl-Z: gives the shell the terminal as it was (the screen, the cursor, the modes curses set, and
    /// bracketed paste off, which curses does not know about), stops the process as SIGTSTP's default would,
    /// and when continued (`fg`) takes the terminal again; the next `draw` repaints everything (the shell wrote
    /// over the screen, and the size may have changed meanwhile).
    public func suspend() {
        guard isOpen else { return }
        _ = curs_set(1)
        Self.write(Self.bracketedPasteOff, to: output)
        endwin()
        // SIGTSTP's default action, for this once: the process stops here and goes on from here.
        var stop = sigaction()
        var kept = sigaction()
        stop.__sigaction_handler.sa_handler = SIG_DFL
        sigaction(SIGTSTP, &stop, &kept)
        var tstp = sigset_t()
        var mask = sigset_t()
        sigemptyset(&tstp)
        sigaddset(&tstp, SIGTSTP)
        pthread_sigmask(SIG_UNBLOCK, &tstp, &mask)
        raise(SIGTSTP)
        // Continued in the background (`bg`): the terminal is the shell's still; stopped again until `fg`
        // (curses would otherwise draw over the shell, and bracketed paste would be on in it).
        // A group the kernel orphaned (the shell that ran ferry is gone) is not stopped by SIGTSTP: a few tries
        // apart, then ferry takes the terminal anyway rather than spin.
        let group = getpgrp()
        for _ in 0..<50 {
            let owner = tcgetpgrp(outputFD)
            guard owner != -1, owner != group else { break }
            raise(SIGTSTP)
            usleep(20_000)
        }
        pthread_sigmask(SIG_SETMASK, &mask, nil)
        sigaction(SIGTSTP, &kept, nil)
        Self.write(Self.bracketedPasteOn, to: output)
        _ = curs_set(0)
        updateSize()
        repaintAll = true
    }

    /// Leaves curses and restores the terminal (idempotent).
    public func close() {
        guard isOpen else { return }
        isOpen = false
        _ = curs_set(1)
        Self.write(Self.bracketedPasteOff, to: output)
        endwin()
        ferry_crash_guard_uninstall()
        delscreen(screen)
    }

    private func attributes(for style: Style) -> (attr_t, Int16) {
        var attributes = ferry_a_normal()
        if style.bold { attributes |= ferry_a_bold() }
        if style.dim { attributes |= ferry_a_dim() }
        if style.underline { attributes |= ferry_a_underline() }
        var reverse = style.reverse
        // Without colour a coloured background (the header) becomes reverse video.
        if !color, style.background != .standard { reverse.toggle() }
        if reverse { attributes |= ferry_a_reverse() }
        guard color, style.foreground != .standard || style.background != .standard else { return (attributes, 0) }
        return (attributes, pair(style.foreground, style.background))
    }

    private func pair(_ foreground: TerminalColor, _ background: TerminalColor) -> Int16 {
        let key = UInt16(foreground.rawValue) << 8 | UInt16(background.rawValue)
        if let known = pairs[key] { return known }
        let next = Int16(pairs.count + 1)
        guard Int32(next) < ferry_color_pairs() else { return 0 }
        func curses(_ c: TerminalColor) -> Int16 { c == .standard ? -1 : Int16(c.rawValue) }
        init_pair(next, curses(foreground), curses(background))
        pairs[key] = next
        return next
    }
}
