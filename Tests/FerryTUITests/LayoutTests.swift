import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
@testable import FerryTUI

@Suite struct LayoutTests {
    /// Every screen at every width from 20 to 200 (and tiny sizes): exact width, right height, selection visible.
    @Test func everyWidthFrom20To200() {
        var queue = Fixtures.queue()
        queue.items[1] = Fixtures.detailedUpload()
        for width in 20...200 {
            for height in [10, 24] {
                for screen in [AppState.Screen.list, .help, .detail(TransferID(2))] {
                    var state = Fixtures.state(width: width, height: height)
                    state.screen = screen
                    state.selectedID = TransferID(9)
                    let canvas = Fixtures.render(state, queue)
                    #expect(canvas.lines.count == height)
                    #expect(canvas.lines.allSatisfy { DisplayWidth.of($0) == width }, "width \(width) \(screen)")
                    if screen == .list {
                        #expect(canvas.text.contains("aband"), "selected row scrolled into view at \(width)x\(height)")
                    }
                }
            }
        }
        for (width, height) in [(0, 0), (1, 1), (5, 2), (12, 3), (19, 4)] {
            _ = Fixtures.render(Fixtures.state(width: width, height: height), queue)
        }
    }

    /// Items finishing (their files being synced, no connection held) are said apart from the running ones:
    /// with `-j 4` a tree of small files showed "14 running" beside "4 at once".
    @Test func theHeaderSaysTheFinishingApartFromTheRunning() {
        var totals = QueueTotals()
        totals.count = [.running: 14, .queued: 808, .completed: 1178]
        totals.finishing = 10
        let queue = QueueSnapshot(version: 1, items: [], totals: totals, maxConcurrent: 4, maxPerHost: 4)
        let wide = Fixtures.render(Fixtures.state(width: 160, height: 10), queue).lines[0]
        #expect(wide.contains("4 running, 10 finishing, 808 queued, 1178 done"), "\(wide)")
        #expect(wide.contains("4 at once"))
        // Crowded: the counts as glyphs, the finishing still apart.
        let narrow = Fixtures.render(Fixtures.state(width: 60, height: 10), queue).lines[0]
        #expect(narrow.contains("4+10"), "\(narrow)")
        // All of them finishing, and an engine that does not say.
        totals.finishing = 14
        let all = Fixtures.render(Fixtures.state(width: 160, height: 10), QueueSnapshot(version: 1, items: [], totals: totals, maxConcurrent: 4, maxPerHost: 4)).lines[0]
        #expect(all.contains("14 finishing, 808 queued") && !all.contains("running"), "\(all)")
        totals.finishing = nil
        let old = Fixtures.render(Fixtures.state(width: 160, height: 10), QueueSnapshot(version: 1, items: [], totals: totals, maxConcurrent: 4, maxPerHost: 4)).lines[0]
        #expect(old.contains("14 running, 808 queued"), "\(old)")
    }

    @Test func hostileNameIsDrawnInert() {
        let hostile = "\u{1B}]0;pwned\u{07}\u{1B}[2Jevil\u{202E}gpj.exe\u{9B}31m\u{7F}\r\n\u{0}.iso"
        var queue = Fixtures.queue()
        queue.items[0] = Fixtures.item(1, hostile, .running, done: 1, total: 2, rate: 1, eta: 1,
                                       url: "https://example.com/x")
        queue.items[0].lastError = "\u{1B}[31mred\u{1B}[0m"
        for screen in [AppState.Screen.list, .detail(TransferID(1))] {
            for unicode in [true, false] {
                var state = Fixtures.state(width: 120, height: 24)
                state.screen = screen
                let canvas = Fixtures.render(state, queue, unicode: unicode)
                for cell in canvas.cells {
                    #expect(!cell.character.unicodeScalars.contains { UntrustedText.isControl($0) })
                }
                #expect(canvas.text.contains(unicode ? "\u{FFFD}]0;pwned\u{FFFD}\u{FFFD}[2Jevil\u{FFFD}gpj" : "?]0;pwned??[2Jevil?gpj"))
            }
        }
    }

    @Test func wideCharactersKeepColumnsAligned() {
        var queue = Fixtures.queue()
        queue.items[0] = Fixtures.item(1, "数据下载完成报告😀.pdf", .running, done: 1, total: 2, rate: 1, eta: 1)
        let canvas = Fixtures.render(Fixtures.state(width: 60, height: 12), queue)
        #expect(canvas.lines.allSatisfy { DisplayWidth.of($0) == 60 })
        #expect(DisplayWidth.of("数据") == 4)
        #expect(DisplayWidth.of("e\u{301}") == 1)
    }

    @Test func progressBars() {
        #expect(ProgressBar.text(progress: 0.5, width: 8, unicode: false) == "[###...]")
        #expect(ProgressBar.text(progress: 1, width: 10, unicode: false) == "[########]")
        #expect(ProgressBar.text(progress: 0.5, width: 4, unicode: true) == "██··")
        #expect(ProgressBar.text(progress: 0.6, width: 4, unicode: true) == "██▍·")
        #expect(ProgressBar.text(progress: nil, width: 6, unicode: true, phase: 0) == "███···")
        #expect(ProgressBar.text(progress: nil, width: 6, unicode: true, phase: 65_536) == "·███··")
    }

    /// Must-show 5: a frame of a 10,000-item queue. Prints the median; not a timed assertion.
    @Test func renderTenThousandItems() {
        var items: [TransferSnapshot] = []
        let states: [TransferState] = [.running, .queued, .paused, .completed, .failed, .waiting]
        for i in 0..<10_000 {
            items.append(Fixtures.item(Int64(i + 1), "file-\(i).bin", states[i % states.count], done: Int64(i) * 1000,
                                       total: 10_000_000, rate: 1e6, eta: 10))
        }
        var totals = QueueTotals()
        for item in items { totals.count[item.state, default: 0] += 1 }
        let queue = QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
        var state = Fixtures.state(width: 120, height: 40)
        state.selectedID = TransferID(5_000)
        state.selectedIndex = 4_999
        let context = RenderContext(unicode: true, now: Fixtures.now)
        var samples: [Double] = []
        for _ in 0..<101 {
            let start = DispatchTime.now().uptimeNanoseconds
            let canvas = Screen.render(state, queue, context)
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            #expect(canvas.height == 40)
        }
        samples.sort()
        print("BENCH render 10,000-item queue, 120x40 frame: median \(String(format: "%.3f", samples[50])) ms, p90 \(String(format: "%.3f", samples[90])) ms")
    }
}
