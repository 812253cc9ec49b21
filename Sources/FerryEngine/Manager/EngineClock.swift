import Dispatch
import Foundation
import Synchronization

/// The engine's time: what the time is, and a timer. Every rule of the engine that depends on time (when a retry
/// is due, a Retry-After date, when an attempt began and ended, the next change of a limit's timetable) reads
/// it here, never the system's clock: the engine runs on `SystemClock`, and a test gives it a `ManualClock` that
/// it moves, so a retry an hour away is checked at once (RetryClockTests) rather than slept for.
public protocol EngineClock: Sendable {
    var now: Date { get }
    /// Calls `body` once `seconds` have passed on this clock (off the caller's thread).
    func after(_ seconds: TimeInterval, _ body: @escaping @Sendable () -> Void)
}

/// The system's clock, with its timers on a queue of its own (one serial queue per engine).
public struct SystemClock: EngineClock {
    private let queue: DispatchQueue

    public init(queue: DispatchQueue = DispatchQueue(label: "ferry.clock")) { self.queue = queue }

    /// For what reads the time and sets no timer of an engine's (a stored item's verbs without an engine).
    public static let shared = SystemClock()

    public var now: Date { Date() }

    public func after(_ seconds: TimeInterval, _ body: @escaping @Sendable () -> Void) {
        // A wall deadline: a timer an hour away fires an hour later by the clock on the wall, a suspend between.
        queue.asyncAfter(wallDeadline: .now() + max(0, seconds), execute: body)
    }
}

/// A clock that moves only when told (`advance`): its timers fire, in the order of their times, as it passes
/// them, on the thread that moves it. For tests of what the engine does with time.
@_spi(Testing) public final class ManualClock: EngineClock {
    private struct Timer {
        var at: Date
        var order: Int
        var body: @Sendable () -> Void
    }

    private let state: Mutex<(now: Date, timers: [Timer], next: Int)>

    public init(now: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
        state = Mutex((now, [], 0))
    }

    public var now: Date { state.withLock { $0.now } }

    /// Timers set and not yet fired.
    public var pending: Int { state.withLock { $0.timers.count } }

    public func after(_ seconds: TimeInterval, _ body: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.timers.append(Timer(at: state.now.addingTimeInterval(max(0, seconds)), order: state.next, body: body))
            state.next += 1
        }
    }

    /// Moves the clock on by `seconds`, firing each timer it passes at its time (a timer that a firing sets, and
    /// that falls within, fires too).
    public func advance(by seconds: TimeInterval) {
        let end = now.addingTimeInterval(seconds)
        while true {
            let due: Timer? = state.withLock { state in
                guard let first = state.timers.indices.filter({ state.timers[$0].at <= end })
                    .min(by: { (state.timers[$0].at, state.timers[$0].order) < (state.timers[$1].at, state.timers[$1].order) })
                else {
                    state.now = end
                    return nil
                }
                let timer = state.timers.remove(at: first)
                state.now = max(state.now, timer.at)
                return timer
            }
            guard let due else { return }
            due.body()
        }
    }
}
