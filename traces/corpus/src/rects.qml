// rects.qml - a small Qt Quick scene for the retrace corpus: 200 animated,
// rotating, semi-transparent rectangles (batched by the scene graph into a
// few draws), a gradient, text, and an opacity layer; quits after 1.5 s.
import QtQuick
import QtQuick.Window

Window {
    width: 480; height: 360; visible: true; color: "#202830"
    Timer { interval: 1500; running: true; onTriggered: Qt.quit() }
    Rectangle {
        anchors.fill: parent; anchors.margins: 20; radius: 16
        gradient: Gradient {
            GradientStop { position: 0.0; color: "#3050a0" }
            GradientStop { position: 1.0; color: "#a03050" }
        }
    }
    Repeater {
        model: 200
        Rectangle {
            id: r
            property real phase: index * 0.37
            width: 18 + (index % 7) * 3; height: width; radius: index % 3 ? 0 : 6
            color: Qt.hsla((index * 0.031) % 1.0, 0.7, 0.55, 0.8)
            x: 200 + 170 * Math.cos(phase); y: 150 + 130 * Math.sin(phase * 1.3)
            NumberAnimation on rotation { from: 0; to: 360; duration: 1000 + index * 7; loops: Animation.Infinite }
            NumberAnimation on phase { from: index * 0.37; to: index * 0.37 + 6.28; duration: 3000; loops: Animation.Infinite }
        }
    }
    Item {
        x: 20; y: 290; width: 300; height: 50
        layer.enabled: true; opacity: 0.7
        Text { text: "retrace corpus: Qt Quick"; font.pixelSize: 24; color: "white" }
    }
}
