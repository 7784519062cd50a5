package mcpserver

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	terminalpb "github.com/classifierd/classifierd/gen/terminal/v1"
	"github.com/classifierd/classifierd/server"
)

// DetectInputPromptInput is detect_input_prompt's input: the fields of
// terminal.v1.DetectInputPromptRequest.
type DetectInputPromptInput struct {
	SessionID     string   `json:"session_id,omitempty" jsonschema:"terminal session whose log (<session_id>.log) is read"`
	Text          string   `json:"text,omitempty" jsonschema:"the terminal's tail, instead of a session log (at most 64 KiB)"`
	MinConfidence *float32 `json:"min_confidence,omitempty" jsonschema:"report a prompt only at or above this confidence, 0-1 (default 0.70)"`
	CommandLine   string   `json:"command_line,omitempty" jsonschema:"the command running in the terminal, if known"`
	Program       string   `json:"program,omitempty" jsonschema:"the program waiting, if known"`
}

// InputPrompt is a detected prompt: terminal.v1.InputPrompt.
type InputPrompt struct {
	PromptText     string  `json:"prompt_text"`
	Confidence     float32 `json:"confidence"`
	PromptType     string  `json:"prompt_type" jsonschema:"password, yes_no, choice, path, text, command or unknown"`
	MatchedPattern string  `json:"matched_pattern"`
	FilePosition   int64   `json:"file_position" jsonschema:"byte offset of the prompt in the session log"`
	Timestamp      string  `json:"timestamp" jsonschema:"RFC 3339 time of the log's last write"`
	IsDangerous    bool    `json:"is_dangerous"`
	DangerReason   string  `json:"danger_reason,omitempty"`
	// DangerConfidence is the danger model's calibrated probability.
	DangerConfidence float32 `json:"danger_confidence" jsonschema:"probability that answering is dangerous; is_dangerous is danger_confidence >= 1/3"`
}

// DetectInputPromptOutput is detect_input_prompt's answer.
type DetectInputPromptOutput struct {
	Detected bool         `json:"detected"`
	Prompt   *InputPrompt `json:"prompt,omitempty"`
}

// InferExpectedInputInput is infer_expected_input's input: the fields of
// terminal.v1.InferExpectedInputRequest.
type InferExpectedInputInput struct {
	PromptText     string `json:"prompt_text" jsonschema:"the prompt, 1-4096 bytes"`
	PromptType     string `json:"prompt_type,omitempty" jsonschema:"password, yes_no, choice, path, text, command or unknown (default: detected)"`
	SessionContext string `json:"session_context,omitempty" jsonschema:"recent terminal output, at most 64 KiB"`
	SessionID      string `json:"session_id,omitempty" jsonschema:"terminal session whose learned answers apply"`
}

// InputSuggestion is one suggested input: terminal.v1.InputSuggestion.
type InputSuggestion struct {
	InputText  string  `json:"input_text"`
	Confidence float32 `json:"confidence"`
	Source     string  `json:"source"`
	Reasoning  string  `json:"reasoning"`
}

// InferExpectedInputOutput is infer_expected_input's answer.
type InferExpectedInputOutput struct {
	Suggestions []InputSuggestion `json:"suggestions"`
	Warnings    []string          `json:"warnings"`
}

// TrackInputEventInput is track_input_event's input: the fields of
// terminal.v1.TrackInputEventRequest.
type TrackInputEventInput struct {
	SessionID      string `json:"session_id" jsonschema:"terminal session id"`
	PromptText     string `json:"prompt_text"`
	InputText      string `json:"input_text,omitempty" jsonschema:"what was typed; secrets are redacted before storage"`
	Success        bool   `json:"success,omitempty"`
	InputSource    string `json:"input_source,omitempty" jsonschema:"who answered: user, agent, ..."`
	ResponseTimeMs int64  `json:"response_time_ms,omitempty"`
	PromptType     string `json:"prompt_type,omitempty" jsonschema:"password, yes_no, choice, path, text, command or unknown (default: detected)"`
	EchoOff        *bool  `json:"echo_off,omitempty" jsonschema:"the terminal did not echo the input (a secret)"`
	CanonicalMode  *bool  `json:"canonical_mode,omitempty"`
}

// TrackInputEventOutput is track_input_event's answer.
type TrackInputEventOutput struct {
	EventID        string `json:"event_id"`
	Recorded       bool   `json:"recorded"`
	PatternUpdated bool   `json:"pattern_updated"`
}

// AddTerminalTools adds the terminal prompt contract's tools to s; each
// calls the same TerminalServer method as the gRPC API.
func AddTerminalTools(s *mcp.Server, term *server.TerminalServer) {
	AddTool(s, &mcp.Tool{Name: ToolDetectInputPrompt, Description: "Detect whether a terminal session is waiting for input " +
		"(password, yes/no, choice, path, text, command), with confidence and whether answering is dangerous.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in DetectInputPromptInput) (*mcp.CallToolResult, DetectInputPromptOutput, error) {
			resp, err := term.DetectInputPrompt(ctx, &terminalpb.DetectInputPromptRequest{SessionId: in.SessionID, Text: in.Text,
				MinConfidence: in.MinConfidence, CommandLine: in.CommandLine, Program: in.Program})
			if err != nil {
				return nil, DetectInputPromptOutput{}, ToolError(err)
			}
			out := DetectInputPromptOutput{Detected: resp.GetDetected()}
			if p := resp.GetPrompt(); p != nil {
				out.Prompt = &InputPrompt{PromptText: p.GetPromptText(), Confidence: p.GetConfidence(), PromptType: p.GetPromptType(),
					MatchedPattern: p.GetMatchedPattern(), FilePosition: p.GetFilePosition(),
					Timestamp: p.GetTimestamp().AsTime().UTC().Format(time.RFC3339Nano), IsDangerous: p.GetIsDangerous(), DangerReason: p.GetDangerReason(),
					DangerConfidence: p.GetDangerConfidence()}
			}
			return nil, out, nil
		})
	AddTool(s, &mcp.Tool{Name: ToolInferExpected, Description: "Suggest what to type at a terminal prompt, with confidence, " +
		"source and warnings (never suggests secrets).", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in InferExpectedInputInput) (*mcp.CallToolResult, InferExpectedInputOutput, error) {
			resp, err := term.InferExpectedInput(ctx, &terminalpb.InferExpectedInputRequest{PromptText: in.PromptText, PromptType: in.PromptType,
				SessionContext: in.SessionContext, SessionId: in.SessionID})
			if err != nil {
				return nil, InferExpectedInputOutput{}, ToolError(err)
			}
			out := InferExpectedInputOutput{Warnings: resp.GetWarnings(), Suggestions: []InputSuggestion{}}
			if out.Warnings == nil {
				out.Warnings = []string{}
			}
			for _, sg := range resp.GetSuggestions() {
				out.Suggestions = append(out.Suggestions, InputSuggestion{InputText: sg.GetInputText(), Confidence: sg.GetConfidence(),
					Source: sg.GetSource(), Reasoning: sg.GetReasoning()})
			}
			return nil, out, nil
		})
	AddTool(s, &mcp.Tool{Name: ToolTrackInputEvent, Description: "Record what was typed at a terminal prompt and whether it worked, " +
		"so later suggestions learn from it (secret inputs are redacted before storage)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in TrackInputEventInput) (*mcp.CallToolResult, TrackInputEventOutput, error) {
			resp, err := term.TrackInputEvent(ctx, &terminalpb.TrackInputEventRequest{SessionId: in.SessionID, PromptText: in.PromptText,
				InputText: in.InputText, Success: in.Success, InputSource: in.InputSource, ResponseTimeMs: in.ResponseTimeMs,
				PromptType: in.PromptType, EchoOff: in.EchoOff, CanonicalMode: in.CanonicalMode})
			if err != nil {
				return nil, TrackInputEventOutput{}, ToolError(err)
			}
			return nil, TrackInputEventOutput{EventID: resp.GetEventId(), Recorded: resp.GetRecorded(), PatternUpdated: resp.GetPatternUpdated()}, nil
		})
}

func invalidArgument(msg string) error { return status.Error(codes.InvalidArgument, msg) }
