import FerryCore
import FerryTUI
import Foundation

// Issue 4, must-show 5: a frame of a 10,000-item queue, in the build a user runs (release).
// Usage: swift run -c release RenderBench
let states: [TransferState] = [.running, .queued, .paused, .completed, .failed, .waiting]
var items: [TransferSnapshot] = []
for i in 0..<10_000 {
    let url = URL(string: "https://example.com/files/file-\(i).bin")!
    items.append(TransferSnapshot(id: TransferID(Int64(i + 1)), spec: TransferSpec(download: url, directory: "/home/me/Downloads"),
                                  state: states[i % states.count], bytesDone: Int64(i) * 1000, bytesExpected: 10_000_000,
                                  fileName: "file-\(i).bin", bytesPerSecond: 1e6, eta: 10))
}
var totals = QueueTotals()
for item in items { totals.count[item.state, default: 0] += 1 }
let queue = QueueSnapshot(version: 1, items: items, totals: totals, maxConcurrent: 4, maxPerHost: 4)
var state = AppState(downloadDirectory: "/home/me/Downloads", width: 120, height: 40)
state.selectedID = TransferID(5_000)
let context = RenderContext(unicode: true, now: Date(timeIntervalSince1970: 1_800_000_000))
var samples: [Double] = []
var cells = 0
for _ in 0..<1_001 {
    let start = DispatchTime.now().uptimeNanoseconds
    let canvas = Screen.render(state, queue, context)
    samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
    cells &+= canvas.width
}
samples.sort()
print(String(format: "render 10,000-item queue, 120x40 frame, 1001 frames: median %.3f ms, p90 %.3f ms, min %.3f ms",
             samples[500], samples[900], samples[0]))
