import Foundation
import Testing
@testable import FerryModel
@testable import FerryTUI

/// Issue 41: what `ferry get`/`put` draw in a terminal instead of the full-screen UI: a line per item under way,
/// a line of totals, a summary at the end, as rendered text.
@Suite struct ProgressReadoutTests {
    let mib = Fixtures.mib
    var items: [TransferSnapshot] { Fixtures.queue().items }

    @Test func aLinePerItemUnderWayAndTheTotals() {
        let lines = ProgressReadout.lines(items, totals: .init(items: 9, done: 1, failed: 1, bytesDone: 40 * mib), width: 100,
                                          maxItems: 8, now: Fixtures.now)
        #expect(lines == [
            "#1 debian-12.iso            [=========>            ]  47%     300.0/628.0 MiB  11.5 MiB/s ETA 29s",
            "#2 photos.zip               [====>                 ]  25%        5.0/20.0 MiB 512.0 KiB/s ETA 30s",
            "#3 backup.tar.gz  retry 2/5 in 8s: HTTP 503",
            "#4 stream.log                                                         3.0 MiB  64.0 KiB/s",
            "1 of 9 done, 1 failed, 12.1 MiB/s",
        ])
    }

    /// At 80 columns, and narrower, every line fits (a wrapped line would break the redraw, which counts lines).
    @Test(arguments: [80, 60, 40, 20])
    func everyLineFitsTheWidth(_ width: Int) {
        let lines = ProgressReadout.lines(items, totals: .init(items: 9), width: width, maxItems: 8, now: Fixtures.now)
        #expect(lines.count == 5)
        for line in lines { #expect(DisplayWidth.of(line) <= width, "\(width): \(line)") }
        // The percentage and the sizes stay while there is room for them; the bar goes first.
        if width >= 40 { #expect(lines[0].contains("47%"), "\(lines[0])") }
        if width < 60 { #expect(!lines[0].contains("["), "\(lines[0])") }
    }

    @Test func pastTheMostItemsOneLineCountsTheRest() {
        let many = (1...20).map { Fixtures.item(Int64($0), "f\($0).bin", .running, done: mib, total: 4 * mib, rate: Double(mib), eta: 3) }
        let lines = ProgressReadout.lines(many, totals: .init(items: 20), width: 80, maxItems: 3, now: Fixtures.now)
        #expect(lines.count == 5)
        #expect(lines[3] == "  and 17 more under way")
        #expect(lines[4] == "0 of 20 done, 20.0 MiB/s")
    }

    /// The totals' rate is the command's (finished files included) when the writer has it: with many small files
    /// the items under way have no rate yet, and their sum said 0 B/s while 5 MiB/s moved.
    @Test func theTotalsRateIsTheCommandsWhenKnown() {
        let starting = [Fixtures.item(7, "f7.bin", .running, done: 0, total: 20_000, rate: nil, eta: nil)]
        #expect(ProgressReadout.lines(starting, totals: .init(items: 2000, done: 951), width: 80, maxItems: 8, now: Fixtures.now).last
                == "951 of 2000 done", "nothing measured yet: no figure")
        #expect(ProgressReadout.lines(starting, totals: .init(items: 2000, done: 951, bytesPerSecond: 5.2 * Double(mib)), width: 80,
                                      maxItems: 8, now: Fixtures.now).last == "951 of 2000 done, 5.2 MiB/s")
    }

    @Test func theSummary() {
        #expect(ProgressReadout.summary(.init(items: 3, done: 2, failed: 1, bytesDone: 60 * mib), elapsed: 5.2)
                == "2 done, 1 failed: 60.0 MiB in 5s (11.5 MiB/s)")
        #expect(ProgressReadout.summary(.init(items: 2, done: 1, bytesDone: 512), elapsed: 0.3) == "1 done, 1 not ended: 512 B in 0s")
    }

    @Test func theBar() {
        #expect(ProgressReadout.bar(0, width: 12) == "[          ]")
        #expect(ProgressReadout.bar(0.5, width: 12) == "[====>     ]")
        #expect(ProgressReadout.bar(1, width: 12) == "[==========]")
    }
}
