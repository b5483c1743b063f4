// ChatdBehaviour: a Unity MonoBehaviour that signs in as a guest, opens the
// realtime connection, joins a lobby and shows its messages with a text
// field to send. Put it on any GameObject, with the SDK's src/*.cs (or
// Chatd.dll) in the project's Assets.
//
// This file needs UnityEngine, so it is not in the SDK's compiled set:
// TestCSharpSDK builds src/*.cs only.

using System;
using System.Collections.Generic;
using System.Threading;
using Chatd;
using UnityEngine;

public class ChatdBehaviour : MonoBehaviour
{
    [Tooltip("chatd's base URLs, in failover order")]
    public string[] baseUrls = { "http://localhost:8080" };
    public string userName = "player1";
    public string lobby = "general";
    public int maxLines = 50;

    ChatdClient api;
    RealtimeClient rt;
    Room room;
    string status = "connecting…";
    string draft = "";
    readonly List<string> lines = new List<string>();

    async void Start()
    {
        api = new ChatdClient(new ClientOptions { BaseUrls = baseUrls });
        try
        {
            await api.SignInAsync(userName);
            // Start runs on the main thread: its SynchronizationContext is
            // Unity's, so the events below are raised on the main thread
            // and may touch GameObjects.
            rt = api.Realtime(new RealtimeOptions { Context = SynchronizationContext.Current });
            rt.MessageReceived += m => AddLine(m.From + ": " + m.Text);
            rt.StateChanged += s => status = s.ToString();
            rt.Error += e => AddLine("! " + e.Code + ": " + e.Message);
            rt.ClosedForGood += (code, why) => status = "closed (" + code + "): " + why;
            await rt.ConnectAsync();
            room = await rt.JoinAsync(lobby);
            status = "in " + room.Id + " via " + rt.Node;
        }
        catch (ChatdException e)
        {
            // e.Code is one of ErrorCodes (name_taken, banned …) or ClientCodes.
            status = e.Code + ": " + e.Message;
        }
    }

    void AddLine(string line)
    {
        lines.Add(line);
        if (lines.Count > maxLines) lines.RemoveAt(0);
    }

    async void Send()
    {
        if (room == null || draft.Trim() == "") return;
        var text = draft;
        draft = "";
        try
        {
            await rt.SayAsync(room.Id, text);
        }
        catch (ChatdException e)
        {
            AddLine("! not sent (" + e.Code + "): " + text);
        }
    }

    void OnGUI()
    {
        GUILayout.Label(status);
        foreach (var l in lines) GUILayout.Label(l);
        GUILayout.BeginHorizontal();
        draft = GUILayout.TextField(draft, GUILayout.Width(300));
        if (GUILayout.Button("Send")) Send();
        GUILayout.EndHorizontal();
    }

    void OnDestroy()
    {
        rt?.Close();
        api?.Dispose();
    }
}
