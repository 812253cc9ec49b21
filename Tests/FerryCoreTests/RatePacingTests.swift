import Foundation
import Testing
@testable import FerryTransport

/// Issue 40: the rates the bandwidth limits make, on an injected clock. The transport's rules (each transfer's
/// RatePacer, the engine's SharedBucket per direction, LimitShares once a second from what each took in) are
/// driven here as CurlTransport drives them, by a loop of its own over simulated seconds, against servers that
/// send as fast as asked or at a pace of their own. The figures are exact whatever the machine's load, so the
/// bands are tight; BandwidthLimitTests checks at a real server that the limits hold at the wire.
@Suite struct RatePacingTests {
    static let mib = Double(1 << 20)

    /// One transfer: the item it is of, what its server sends (bytes per second; nil: as fast as it is read),
    /// what waits in its socket, and what it took in, per millisecond step.
    struct Flow {
        var item: Int64
        var supply: Double?
        /// What its server sends between two times instead (a slow stretch: a busy machine, a slow disk).
        var slowStretch: (from: Double, to: Double, rate: Double)?
        var buffered = 0.0
        var pacer = RatePacer()
        var waiting = false
        var ended = false
        /// Bytes taken in at each step.
        var taken: [Int] = []
    }

    /// The limits in force: the engine's global rate for the direction and the items' own.
    struct Limits {
        var global: Double?
        var own: [Int64: Int64] = [:]
    }

    /// A simulated transport: every `step` seconds it works the shares out again when they changed or a second
    /// has passed (measuring each transfer's intake first), lets go those whose wait for their rate is over,
    /// and reads what each socket holds, 16 KiB at most to a read as libcurl does, through each transfer's pacer.
    struct Transport {
        var flows: [Flow]
        var limits: Limits
        var now = 0.0
        let step = 0.001
        var lastShareAt = 0.0
        var sharesChanged = true
        var shared: SharedBucket?
        /// Flows read in this order at each step (libcurl's order is its own: both are tried).
        var reversed = false
        static let socketBuffer = Double(256 << 10)

        init(_ flows: [Flow], _ limits: Limits, reversed: Bool = false) {
            self.flows = flows
            self.limits = limits
            self.reversed = reversed
        }

        mutating func change(_ body: (inout Limits) -> Void) {
            body(&limits)
            sharesChanged = true
        }

        mutating func shareLimits() {
            if now - lastShareAt >= 1 {
                for index in flows.indices { flows[index].pacer.measureIntake(over: now - lastShareAt) }
                lastShareAt = now
            }
            if let global = limits.global {
                if shared == nil { shared = SharedBucket(rate: global, now: now) } else if shared!.bucket.rate != global {
                    shared!.bucket.setRate(global, now: now)
                }
            } else {
                shared = nil
            }
            let open = flows.indices.filter { !flows[$0].ended }
            let rates = LimitShares.rates(global: limits.global, own: limits.own,
                                          members: open.map { LimitShares.Member(item: flows[$0].item, intake: flows[$0].pacer.intake) })
            for (index, rate) in zip(open, rates) {
                flows[index].pacer.share(shared)
                flows[index].pacer.setRate(rate, now: now)
                if flows[index].waiting { flows[index].pacer.ratesChanged(now: now) }
            }
        }

        mutating func run(until end: Double) {
            while now < end - step / 2 {
                if sharesChanged || now - lastShareAt >= 1 {
                    sharesChanged = false
                    shareLimits()
                }
                let order = reversed ? Array(flows.indices.reversed()) : Array(flows.indices)
                for index in order {
                    var flow = flows[index]
                    defer { flows[index] = flow }
                    var took = 0
                    defer { flow.taken.append(took) }
                    guard !flow.ended else { continue }
                    // The server's bytes arrive (a limited download's socket holds a quarter second's worth, CurlTransfer.receiveBuffer).
                    var supply = flow.supply
                    if let slow = flow.slowStretch, now >= slow.from, now < slow.to { supply = slow.rate }
                    flow.buffered = supply.map { min(flow.buffered + $0 * step, Self.socketBuffer) } ?? Self.socketBuffer
                    if flow.waiting {
                        guard let at = flow.pacer.resumeAt, at <= now else { continue }
                        flow.pacer.waitEnded()
                        flow.waiting = false
                    }
                    while flow.buffered >= 1 {
                        let read = Int(min(flow.buffered, Double(16 << 10)))
                        if flow.pacer.limited {
                            guard flow.pacer.allowance(now) > 0 else {
                                flow.pacer.hold(now)
                                flow.waiting = true
                                break
                            }
                            flow.pacer.spend(read, now: now)
                        }
                        flow.pacer.count(read)
                        flow.buffered -= Double(read)
                        took += read
                    }
                }
                now += step
            }
        }

        /// Bytes per second `flow` took in between two times.
        func rate(_ flow: Int, from: Double, to: Double) -> Double {
            let steps = flows[flow].taken[Int((from / step).rounded())..<Int((to / step).rounded())]
            return Double(steps.reduce(0, +)) / (to - from)
        }
    }

    @Test(arguments: [false, true])
    func anItemsOwnLimit(reversed: Bool) {
        var transport = Transport([Flow(item: 1, supply: nil)], Limits(own: [1: 1 << 20]), reversed: reversed)
        transport.run(until: 10)
        let rate = transport.rate(0, from: 2, to: 10)
        #expect(abs(rate / Self.mib - 1) < 0.01, "\(rate / Self.mib) MiB/s over seconds 2-10")
        // No second carries more than a quarter second's burst over the rate.
        for second in 0..<10 { #expect(transport.rate(0, from: Double(second), to: Double(second + 1)) <= 1.25 * Self.mib + 16_384) }
    }

    @Test(arguments: [false, true])
    func aGlobalLimitIsSharedFairlyBetweenTwoItems(reversed: Bool) {
        var transport = Transport([Flow(item: 1, supply: nil), Flow(item: 2, supply: nil)], Limits(global: Self.mib), reversed: reversed)
        transport.run(until: 10)
        let a = transport.rate(0, from: 3, to: 10), b = transport.rate(1, from: 3, to: 10)
        #expect(abs((a + b) / Self.mib - 1) < 0.01, "\((a + b) / Self.mib) MiB/s in all")
        #expect(abs(a / Self.mib - 0.5) < 0.03 && abs(b / Self.mib - 0.5) < 0.03, "a \(a / Self.mib), b \(b / Self.mib) MiB/s")
    }

    /// What a slow item cannot use goes to the other: one server sends at 256 KiB/s, and the two still take the
    /// whole 1 MiB/s, the slow one all its server sends.
    @Test(arguments: [false, true])
    func whatASlowItemCannotUseGoesToTheOther(reversed: Bool) {
        var transport = Transport([Flow(item: 1, supply: 256 * 1024), Flow(item: 2, supply: nil)], Limits(global: Self.mib),
                                  reversed: reversed)
        transport.run(until: 15)
        for start in stride(from: 4.0, to: 15, by: 5) {
            let slow = transport.rate(0, from: start, to: min(start + 5, 15)), fast = transport.rate(1, from: start, to: min(start + 5, 15))
            print("RatePacingTests: global 1 MiB/s, one server at 256 KiB/s, from \(start) s: slow \(slow / Self.mib), fast \(fast / Self.mib) MiB/s")
            #expect(slow > 0.95 * 0.25 * Self.mib, "slow \(slow / Self.mib) MiB/s from \(start) s")
            #expect(fast > 0.73 * Self.mib, "fast \(fast / Self.mib) MiB/s from \(start) s")
            #expect(slow + fast > 0.98 * Self.mib && slow + fast < 1.02 * Self.mib, "\((slow + fast) / Self.mib) MiB/s in all from \(start) s")
        }
    }

    /// A limit changed in mid transfer holds from then on: 512 KiB/s, then 2 MiB/s from second 5.
    @Test func aLimitChangedMidTransfer() {
        var transport = Transport([Flow(item: 1, supply: nil)], Limits(own: [1: 512 << 10]))
        transport.run(until: 5)
        transport.change { $0.own[1] = 2 << 20 }
        transport.run(until: 11)
        let before = transport.rate(0, from: 1, to: 5), after = transport.rate(0, from: 5.5, to: 11)
        #expect(abs(before / (512 * 1024) - 1) < 0.02, "\(before / Self.mib) MiB/s before")
        #expect(abs(after / (2 * Self.mib) - 1) < 0.02, "\(after / Self.mib) MiB/s after the change")
    }

    /// A transfer that could not keep up for a while (its server slow, or the machine busy) gets its whole rate
    /// back once it can: alone under its own limit, and beside another under a global one. (Under the whole test
    /// suite's load a limit raised to 2 MiB/s held at 0.25: a slow second's intake capped an item that shared
    /// nothing.)
    @Test(arguments: [false, true])
    func aTransferThatCouldNotKeepUpGetsItsRateBack(global: Bool) {
        let slow = (from: 2.0, to: 4.0, rate: 100.0 * 1024)
        var transport = global
            ? Transport([Flow(item: 1, supply: nil, slowStretch: slow), Flow(item: 2, supply: nil)], Limits(global: 2 * Self.mib))
            : Transport([Flow(item: 1, supply: nil, slowStretch: slow)], Limits(own: [1: 2 << 20]))
        transport.run(until: 12)
        let during = transport.rate(0, from: 2.5, to: 4)
        #expect(during < 0.2 * Self.mib, "\(during / Self.mib) MiB/s while its server was slow")
        let after = transport.rate(0, from: 7, to: 12)
        let expected = global ? Self.mib : 2 * Self.mib
        #expect(abs(after / expected - 1) < 0.02, "\(after / Self.mib) MiB/s from 3 s after the slow stretch")
    }

    /// A limit lifted while its transfer waits out its rate reaches it at once (at 100 B/s it waited 164 s for
    /// its next 16 KiB after the limit was gone).
    @Test func aLimitLiftedWhileATransferWaitsTakesEffectAtOnce() {
        var transport = Transport([Flow(item: 1, supply: nil)], Limits(own: [1: 100]))
        transport.run(until: 2)
        #expect(transport.flows[0].waiting)
        transport.change { $0.own[1] = nil }
        transport.run(until: 2.01)
        #expect(!transport.flows[0].waiting)
        #expect(transport.rate(0, from: 2, to: 2.01) > 100 * Self.mib, "it runs free at once")
    }
}
